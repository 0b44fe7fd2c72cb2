import Foundation

/// What a central manager with a restore identifier saves on every change: the scan it
/// runs, and the peripherals it is connected to or has pending connections to, with the
/// services and characteristics discovered and which characteristics it is subscribed to
/// (what Core Bluetooth's restored-state keys carry).
///
/// Attribute and device tokens are BlueZ's names for them, kept opaque here; they stay valid
/// while the device's GATT database stays the same.
struct CentralRestorationRecord: RestorationRecord {
    struct Scan: Codable, Hashable, Sendable {
        /// Service UUIDs scanned for; nil for every peripheral.
        var services: [String]?
        var allowDuplicates: Bool
        var solicitedServiceUUIDs: [String]
        var rssiThreshold: Int?
        var pattern: String?
    }

    struct Characteristic: Codable, Hashable, Sendable {
        var uuid: String
        var properties: UInt
        var token: String
        var isNotifying: Bool
    }

    struct Service: Codable, Hashable, Sendable {
        var uuid: String
        var isPrimary: Bool
        var token: String
        /// Nil when characteristics were never discovered.
        var characteristics: [Characteristic]?
    }

    struct Peripheral: Codable, Hashable, Sendable {
        var identifier: UUID
        var device: String
        var name: String?
        /// Nil when services were never discovered (or the link dropped since).
        var services: [Service]?
    }

    var scan: Scan?
    var peripherals: [Peripheral] = []

    var isEmpty: Bool { scan == nil && peripherals.isEmpty }
}

extension CentralRestorationRecord.Scan {
    init(services: [BluetoothUUID]?, options: ScanOptions) {
        self.services = services.map { $0.map(\.uuidString) }
        allowDuplicates = options.allowDuplicates
        solicitedServiceUUIDs = options.solicitedServiceUUIDs.map(\.uuidString)
        rssiThreshold = options.rssiThreshold
        pattern = options.pattern
    }

    /// The scan's service UUIDs (unparsable ones left out).
    var serviceUUIDs: [BluetoothUUID]? { services.map { $0.compactMap(BluetoothUUID.init(parsing:)) } }

    /// The scan's options.
    var options: ScanOptions {
        ScanOptions(
            allowDuplicates: allowDuplicates,
            solicitedServiceUUIDs: solicitedServiceUUIDs.compactMap(BluetoothUUID.init(parsing:)),
            rssiThreshold: rssiThreshold, pattern: pattern)
    }

    /// Core Bluetooth's scan option dictionary for `CBCentralManagerRestoredStateScanOptionsKey`.
    var optionsDictionary: [String: Any] {
        var dictionary: [String: Any] = [CBCentralManagerScanOptionAllowDuplicatesKey: NSNumber(value: allowDuplicates)]
        if !solicitedServiceUUIDs.isEmpty {
            dictionary[CBCentralManagerScanOptionSolicitedServiceUUIDsKey] = options.solicitedServiceUUIDs
        }
        return dictionary
    }
}
