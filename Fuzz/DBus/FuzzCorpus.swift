// The seed corpus (`--make-corpus=DIR`).

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Seed corpus

/// Writes small real messages, made with our own factories, as seeds for every mode.
enum FuzzCorpus {
    static func write(to directory: String) -> Bool {
        mkdir(directory, 0o755)
        var seeds: [(String, [UInt8])] = []
        for (name, message) in messages() {
            dbus_message_set_serial(message.raw, 42)
            guard let wire = fuzzMarshal(message) else {
                fuzzPrintError("cannot fuzzMarshal seed \(name)")
                return false
            }
            seeds.append(("raw-\(name)", [0] + wire))
            seeds.append(("framed-\(name)", [1] + wire))
        }
        // Generator seeds: a fixed pseudo-random stream per mode (our own LCG).
        var state: UInt32 = 0x2545_F491
        for mode in [2, 3, 4, 5] {
            for variant in 0..<3 {
                var bytes: [UInt8] = [UInt8(mode)]
                for _ in 0..<(48 + 48 * variant) {
                    state = state &* 1_664_525 &+ 1_013_904_223
                    bytes.append(UInt8(truncatingIfNeeded: state >> 24))
                }
                seeds.append(("mode\(mode)-\(variant)", bytes))
            }
        }
        for (name, bytes) in seeds {
            let path = directory + "/" + name
            guard let file = fopen(path, "wb") else {
                fuzzPrintError("cannot write \(path)")
                return false
            }
            _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        print("wrote \(seeds.count) seeds to \(directory)")
        return true
    }

    static func messages() -> [(String, DBusMessage)] {
        let characteristic: ObjectPath = try! ObjectPath("/org/bluez/hci0/dev_00_11_22_33_44_55/service0010/char0011")
        let device: ObjectPath = try! ObjectPath("/org/bluez/hci0/dev_00_11_22_33_44_55")
        var result: [(String, DBusMessage)] = []
        func add(_ name: String, _ make: () throws(DBusError) -> DBusMessage) {
            do {
                let message = try make()
                dbus_message_set_sender(message.raw, ":1.7")
                result.append((name, message))
            } catch {
                fuzzPrintError("cannot make seed \(name): \(error)")
            }
        }
        add("properties-changed-value") { () throws(DBusError) in
            try DBusMessage.signal(
                path: characteristic, interface: .properties, member: "PropertiesChanged",
                arguments: [
                    .string("org.bluez.GattCharacteristic1"),
                    .stringVariantDictionary(["Value": .bytes(Array(0..<20))]), .stringArray([]),
                ])
        }
        add("properties-changed-device") { () throws(DBusError) in
            try DBusMessage.signal(
                path: device, interface: .properties, member: "PropertiesChanged",
                arguments: [
                    .string("org.bluez.Device1"),
                    .stringVariantDictionary([
                        "RSSI": .int16(-60), "Connected": .bool(true),
                        "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
                        "ManufacturerData": .dictionary(
                            key: "q", value: "v", [.init(.uint16(76), .variant(.bytes([2, 21])))]),
                    ]),
                    .stringArray(["Name"]),
                ])
        }
        add("interfaces-added") { () throws(DBusError) in
            try DBusMessage.signal(
                path: .root, interface: .objectManager, member: "InterfacesAdded",
                arguments: [
                    .objectPath(device),
                    .dictionary(
                        key: "s", value: "a{sv}",
                        [
                            .init(
                                .string("org.bluez.Device1"),
                                .stringVariantDictionary([
                                    "Address": .string("00:11:22:33:44:55"), "Paired": .bool(false),
                                    "Adapter": .objectPath(try ObjectPath("/org/bluez/hci0")),
                                ]))
                        ]),
                ])
        }
        add("read-value-call") { () throws(DBusError) in
            try DBusMessage.methodCall(
                destination: "org.bluez", path: characteristic, interface: "org.bluez.GattCharacteristic1",
                member: "ReadValue",
                arguments: [
                    .stringVariantDictionary(["offset": .uint16(0), "mtu": .uint16(517), "device": .objectPath(device)])
                ])
        }
        add("managed-objects-return") { () throws(DBusError) in
            let call = try DBusMessage.methodCall(
                destination: "org.bluez", path: .root, interface: .objectManager, member: "GetManagedObjects")
            dbus_message_set_serial(call.raw, 9)
            return try DBusMessage.methodReturn(
                to: call,
                arguments: [
                    .dictionary(
                        key: "o", value: "a{sa{sv}}",
                        [
                            .init(
                                .objectPath(characteristic),
                                .dictionary(
                                    key: "s", value: "a{sv}",
                                    [
                                        .init(
                                            .string("org.bluez.GattCharacteristic1"),
                                            .stringVariantDictionary([
                                                "UUID": .string("00002a37-0000-1000-8000-00805f9b34fb"),
                                                "Flags": .stringArray(["notify"]), "Value": .bytes([0x16, 0x48]),
                                            ]))
                                    ]))
                        ])
                ])
        }
        add("error-reply") { () throws(DBusError) in
            let call = try DBusMessage.methodCall(
                destination: "org.bluez", path: characteristic, interface: "org.bluez.GattCharacteristic1",
                member: "WriteValue")
            dbus_message_set_serial(call.raw, 11)
            guard
                let reply = DBusMessage.errorReply(
                    to: call, error: DBusError(name: "org.bluez.Error.Failed", message: "0x80"))
            else { throw DBusError(.noMemory, "errorReply") }
            return reply
        }
        add("all-types") { () throws(DBusError) in
            try DBusMessage.methodCall(
                destination: nil, path: .root, interface: nil, member: "AllTypes",
                arguments: [
                    .structure([
                        .byte(255), .bool(true), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7),
                        .double(.nan), .double(-0.0), .string("é\u{10FFFF}"), .objectPath(.root), .signature("a{sv}"),
                    ]),
                    .variant(.variant(.array(element: "(iy)", [.structure([.int32(1), .byte(2)])]))),
                    .dictionary(key: "t", value: "as", [.init(.uint64(1), .stringArray(["a", "b"]))]),
                    .array(element: "ay", [.bytes([]), .bytes([1, 2, 3])]),
                ])
        }
        return result
    }
}
