// The oracles of the restoration target.

import BlueZ
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Loads `bytes` as the saved state of ``fuzzFileIdentifier``: a record (usable, and
/// round-tripping), or a content error with the file moved aside.
func fuzzLoadFile<Record: FuzzRestorable>(_ bytes: [UInt8], as type: Record.Type, role: RestorationStore.Role) {
    defer { fuzzEmptyStore() }
    fuzzWriteStateFile(bytes, for: fuzzFileIdentifier)
    let record: Record?
    do throws(RestorationError) {
        record = try fuzzStore.load(type, role: role, for: fuzzFileIdentifier)
    } catch {
        fuzzCheckMovedAside(error, bytes: bytes, identifier: fuzzFileIdentifier)
        return
    }
    guard let record else { fuzzFail("load returned nil for an existing file") }
    fuzzCheck(fuzzReadStateFile(for: fuzzFileIdentifier) == bytes, "a file that loads was changed")
    fuzzCheck(fuzzStore.savedIdentifiers(for: role) == [fuzzFileIdentifier], "a loaded file is not listed")
    record.fuzzUse()
    fuzzRoundTrip(record, role: role, identifier: fuzzFileIdentifier)
}

/// A content error (never a trap, never a file-system code for our plain file), after which
/// the file is at `<name>.unreadable` and no longer listed.
func fuzzCheckMovedAside(_ error: RestorationError, bytes: [UInt8], identifier: String) {
    let contentCodes: [RestorationError.Code] = [.unreadable, .unsupportedVersion, .wrongRole, .wrongIdentifier]
    fuzzCheck(contentCodes.contains(error.code), "load threw \(error)")
    fuzzCheck(fuzzReadStateFile(for: identifier) == nil, "an unusable file was left in place: \(error)")
    fuzzCheck(
        fuzzReadStateFile(for: identifier, suffix: RestorationStore.unreadableSuffix) == bytes,
        "an unusable file was not moved aside intact")
    fuzzCheck(fuzzStore.savedIdentifiers().isEmpty, "a moved-aside file is still listed")
}

/// Saves `record` and loads it again: the same record, unless its include chains are longer
/// than the documented limit (then `unreadable`, and the file is moved aside).
func fuzzRoundTrip<Record: FuzzRestorable>(_ record: Record, role: RestorationStore.Role, identifier: String) {
    defer { fuzzEmptyStore() }
    do throws(RestorationError) {
        try fuzzStore.save(record, role: role, for: identifier)
    } catch {
        fuzzFail("save failed: \(error)")
    }
    guard let saved = fuzzReadStateFile(for: identifier) else { fuzzFail("save wrote no file") }
    fuzzCheck(fuzzStore.savedIdentifiers() == [identifier], "a saved identifier is not listed")
    let loaded: Record?
    do throws(RestorationError) {
        loaded = try fuzzStore.load(Record.self, role: role, for: identifier)
    } catch {
        fuzzCheck(record.fuzzTooDeep, "a saved record does not load: \(error)")
        fuzzCheck(error.code == .unreadable, "too deep a record: \(error.code), not unreadable")
        fuzzCheckMovedAside(error, bytes: saved, identifier: identifier)
        return
    }
    fuzzCheck(!record.fuzzTooDeep, "a record with too deep include chains loaded")
    fuzzCheck(loaded == record, "load(save(record)) != record")
    // The other role is refused, and the file moved aside.
    let other: RestorationStore.Role = role == .central ? .peripheral : .central
    do throws(RestorationError) {
        _ = try fuzzStore.load(Record.self, role: other, for: identifier)
        fuzzFail("a \(role) state loaded as a \(other) state")
    } catch {
        fuzzCheck(error.code == .wrongRole, "wrong role gave \(error.code)")
    }
}

// MARK: - Using a loaded record as the managers do

protocol FuzzRestorable: RestorationRecord {
    /// Longer include chains than the store reads.
    var fuzzTooDeep: Bool { get }
    /// What the manager does with a restored record, without a bus.
    func fuzzUse()
}

extension CentralRestorationRecord: FuzzRestorable {
    var fuzzTooDeep: Bool { false }

    func fuzzUse() {
        if let scan {
            let uuids = scan.serviceUUIDs
            fuzzCheck(uuids?.count ?? 0 <= scan.services?.count ?? 0, "more scan UUIDs than saved")
            _ = scan.options
            _ = scan.optionsDictionary
        }
        for peripheral in peripherals {
            if let device = BlueZClient.DeviceID(token: peripheral.device) {
                fuzzCheck(device.token == peripheral.device, "device token round trip")
            }
            for service in peripheral.services ?? [] {
                _ = BluetoothUUID(parsing: service.uuid)
                _ = BlueZClient.AttributeID(token: service.token)
                for characteristic in service.characteristics ?? [] {
                    _ = BluetoothUUID(parsing: characteristic.uuid)
                    _ = CharacteristicProperties(rawValue: characteristic.properties)
                    if let attribute = BlueZClient.AttributeID(token: characteristic.token) {
                        fuzzCheck(attribute.token == characteristic.token, "attribute token round trip")
                    }
                }
            }
        }
    }
}

extension PeripheralRestorationRecord: FuzzRestorable {
    var fuzzTooDeep: Bool {
        Self.includeDepth(services.map { $0.includes ?? [] }) > Self.maximumIncludeDepth
    }

    func fuzzUse() {
        fuzzCheck(!fuzzTooDeep, "a record with too deep include chains was read")
        let restored = PeripheralManager.restoredServices(services)
        fuzzCheck(restored.count <= services.count, "more services restored than saved")
        for service in restored {
            fuzzCheck(!PeripheralManager.includeOrder(of: service, excluding: []).cycle, "restored services in a cycle")
        }
        for characteristic in PeripheralManager.allCharacteristics(of: restored) {
            for central in characteristic.subscribedCentrals ?? [] {
                fuzzCheck((20...514).contains(central.maximumUpdateValueLength), "a restored central's length")
            }
        }
        if let advertisement {
            _ = advertisement.dictionary
            _ = PeripheralEngine.advertisementContent(advertisement)
        }
    }
}
