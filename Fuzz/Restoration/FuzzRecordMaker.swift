// Generated restoration records: what managers save, and what a hand-edited file could
// hold (any Unicode text, UUIDs that do not parse, huge numbers, include indices out of
// range or in cycles, chains of included services past the limit).

import Foundation

struct FuzzRecordMaker {
    /// Records' elements left to make; past it every list is empty.
    var budget = 256

    static let uuids = [
        "180D", "2A37", "0x2902", "0000180d-0000-1000-8000-00805f9b34fb", "12345678", "",
        "E20A39F4-73F5-4BC4-A12F-17D1AD07A961", "not a uuid", "180", "{180D}",
    ]

    static let tokens = [
        "/org/bluez/hci0/dev_00_11_22_33_44_55", "/org/bluez/hci0/dev_00_11_22_33_44_55/service0010",
        "/org/bluez/hci0/dev_00_11_22_33_44_55/service0010/char0011", "/dev_", "/", "", "dev_AA", "//",
    ]

    mutating func count(_ input: inout FuzzInput, _ usual: Int) -> Int {
        budget > 0 ? input.below(input.oneIn(16) ? 4 * usual : usual) : 0
    }

    mutating func text(_ input: inout FuzzInput) -> String {
        if input.oneIn(2) { return ["", "fuzz", "Heart Rate", "é\u{10FFFF}\u{0}", "\"\\/"][input.below(5)] }
        return String(decoding: input.take(input.below(20)), as: UTF8.self)
    }

    mutating func identifier(_ input: inout FuzzInput) -> String {
        // Short identifiers are hex-encoded in the file name, long ones hashed.
        input.oneIn(4) ? String(repeating: text(&input) + "x", count: 1 + input.below(40)) : text(&input)
    }

    mutating func uuidText(_ input: inout FuzzInput) -> String {
        input.oneIn(4) ? text(&input) : Self.uuids[input.below(Self.uuids.count)]
    }

    mutating func uuid(_ input: inout FuzzInput) -> UUID {
        let b = input.take(16)
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    mutating func bluetoothUUID(_ input: inout FuzzInput) -> BluetoothUUID {
        switch input.below(3) {
        case 0: BluetoothUUID(input.uint16())
        case 1: BluetoothUUID(uuid32: input.uint32())
        default: BluetoothUUID(uuid(&input))
        }
    }

    mutating func token(_ input: inout FuzzInput) -> String {
        input.oneIn(4) ? text(&input) : Self.tokens[input.below(Self.tokens.count)]
    }

    mutating func int(_ input: inout FuzzInput) -> Int {
        input.oneIn(4) ? Int(truncatingIfNeeded: input.uint64()) : input.below(600) - 50
    }

    mutating func data(_ input: inout FuzzInput) -> Data { Data(input.take(count(&input, 24))) }

    // MARK: - Central

    mutating func central(_ input: inout FuzzInput) -> CentralRestorationRecord {
        var record = CentralRestorationRecord()
        if !input.oneIn(3) {
            record.scan = .init(
                services: input.oneIn(3) ? nil : (0..<count(&input, 4)).map { _ in uuidText(&input) },
                allowDuplicates: input.oneIn(2),
                solicitedServiceUUIDs: (0..<count(&input, 3)).map { _ in uuidText(&input) },
                rssiThreshold: input.oneIn(2) ? nil : int(&input), pattern: input.oneIn(2) ? nil : text(&input))
        }
        record.peripherals = (0..<count(&input, 4)).map { _ in
            budget -= 1
            return .init(
                identifier: uuid(&input), device: token(&input), name: input.oneIn(3) ? nil : text(&input),
                services: input.oneIn(3) ? nil : (0..<count(&input, 4)).map { _ in centralService(&input) })
        }
        return record
    }

    mutating func centralService(_ input: inout FuzzInput) -> CentralRestorationRecord.Service {
        budget -= 1
        return .init(
            uuid: uuidText(&input), isPrimary: input.oneIn(2), token: token(&input),
            characteristics: input.oneIn(3)
                ? nil
                : (0..<count(&input, 5)).map { _ in
                    budget -= 1
                    return .init(
                        uuid: uuidText(&input), properties: UInt(truncatingIfNeeded: input.uint64() >> input.below(64)),
                        token: token(&input), isNotifying: input.oneIn(2))
                })
    }

    // MARK: - Peripheral

    mutating func peripheral(_ input: inout FuzzInput) -> PeripheralRestorationRecord {
        var record = PeripheralRestorationRecord()
        let services = count(&input, 6)
        record.services = (0..<services).map { index in
            budget -= 1
            var includes: [Int]? = nil
            if input.oneIn(2) {
                // Usually a chain to the next service (long chains), sometimes anything.
                includes = (0..<(1 + input.below(3))).map { _ in
                    input.oneIn(3) ? int(&input) : index + 1
                }
            }
            return .init(
                uuid: uuidText(&input), isPrimary: input.oneIn(2),
                characteristics: (0..<count(&input, 4)).map { _ in peripheralCharacteristic(&input) },
                includes: includes, isAdded: input.oneIn(2) ? nil : input.oneIn(2))
        }
        if input.oneIn(2) {
            record.advertisement = AdvertisementData(
                localName: input.oneIn(2) ? nil : text(&input), manufacturerData: input.oneIn(2) ? nil : data(&input),
                serviceData: Dictionary(
                    (0..<count(&input, 3)).map { _ in (bluetoothUUID(&input), data(&input)) }, uniquingKeysWith: { $1 }),
                serviceUUIDs: (0..<count(&input, 3)).map { _ in bluetoothUUID(&input) },
                overflowServiceUUIDs: (0..<count(&input, 2)).map { _ in bluetoothUUID(&input) },
                txPowerLevel: input.oneIn(2) ? nil : int(&input), isConnectable: input.oneIn(2) ? nil : input.oneIn(2),
                solicitedServiceUUIDs: (0..<count(&input, 2)).map { _ in bluetoothUUID(&input) })
        }
        return record
    }

    mutating func peripheralCharacteristic(_ input: inout FuzzInput) -> PeripheralRestorationRecord.Characteristic {
        budget -= 1
        return .init(
            uuid: uuidText(&input), properties: UInt(truncatingIfNeeded: input.uint64() >> input.below(64)),
            permissions: UInt(input.below(32)), value: input.oneIn(2) ? nil : data(&input),
            descriptors: (0..<count(&input, 3)).map { _ in .init(uuid: uuidText(&input), value: data(&input)) },
            subscribedCentrals: input.oneIn(2)
                ? nil
                : (0..<count(&input, 3)).map { _ in
                    .init(identifier: uuid(&input), maximumUpdateValueLength: int(&input))
                }
        )
    }
}
