// Values shaped as bluetoothd sends them (property dictionaries, object trees, request
// options), and near misses: a property of another type, variants inside variants,
// duplicate keys, dictionaries keyed by the wrong type. Every value made here is valid
// D-Bus (homogeneous arrays, consistent signatures, no descriptors, no NaN), so it can
// also be sent in a message and decoded again.

import DBus

struct FuzzBlueZValues {
    /// Values left to make; past it every container is empty.
    var budget = 384
    /// Containers around the value being made; past 8 only basic values are made (a message
    /// allows 64, and sending one back is part of the oracles).
    var depth = 0

    /// bluetoothd's type for each property the library reads.
    static let propertyTypes: [String: String] = [
        "Address": "s", "AddressType": "s", "Name": "s", "Alias": "s", "Adapter": "o", "RSSI": "n", "TxPower": "n",
        "UUIDs": "as", "ManufacturerData": "a{qv}", "ServiceData": "a{sv}", "AdvertisingFlags": "ay",
        "AdvertisingData": "a{yv}", "Connected": "b", "ServicesResolved": "b", "Paired": "b", "Bonded": "b",
        "Trusted": "b", "Connectable": "b", "Powered": "b", "UUID": "s", "Primary": "b", "Includes": "ao",
        "Service": "o", "Characteristic": "o", "Flags": "as", "Value": "ay", "Notifying": "b", "MTU": "q",
        "NotifyAcquired": "b", "WriteAcquired": "b",
        // GATT request options.
        "offset": "q", "mtu": "q", "device": "o", "type": "s", "prepare-authorize": "b", "link": "s",
    ]
    static let propertyNames = propertyTypes.keys.sorted()

    static let interfaces = [
        "org.bluez.Device1", "org.bluez.Adapter1", "org.bluez.GattService1", "org.bluez.GattCharacteristic1",
        "org.bluez.GattDescriptor1", "org.freedesktop.DBus.Properties", "org.bluez.LEAdvertisingManager1",
    ]

    /// Every type `value(ofType:)` makes.
    static let types = [
        "s", "o", "b", "n", "q", "y", "u", "i", "x", "t", "d", "g", "ay", "as", "ao", "a{qv}", "a{sv}", "a{yv}",
        "a{ss}", "a{sa{sv}}", "(sq)", "v", "av", "aay",
    ]

    static let texts = [
        "", "org.bluez.Device1", "public", "random", "00:11:22:33:44:55", "0000180d-0000-1000-8000-00805f9b34fb",
        "notify", "read", "write-without-response", "request", "command", "reliable", "dev_", "_", "é\u{10FFFF}",
    ]

    mutating func text(_ input: inout FuzzInput) -> String {
        if !input.oneIn(3) { return Self.texts[input.below(Self.texts.count)] }
        let bytes = input.take(input.below(24)).map { $0 == 0 ? UInt8(ascii: "_") : $0 }
        return String(decoding: bytes, as: UTF8.self)
    }

    static let pathCharacters = Array("abcdef0123456789_ABCDEF".utf8)

    /// A path as bluetoothd names its objects (adapters, devices, their GATT objects), or another.
    mutating func objectPath(_ input: inout FuzzInput) -> ObjectPath {
        var elements: [String] = []
        switch input.below(6) {
        case 0: return .root
        case 1, 2, 3:
            elements = ["org", "bluez", "hci\(input.below(3))"]
            if input.below(4) != 0 {
                let octets = (0..<(input.oneIn(6) ? input.below(8) : 6)).map { _ in
                    String(input.byte(), radix: 16, uppercase: true)
                }
                elements.append("dev_" + octets.joined(separator: "_"))
                for name in ["service", "char", "desc"] where input.oneIn(2) {
                    elements.append(name + String(input.uint16(), radix: 16))
                }
            }
        default:
            for _ in 0..<(1 + input.below(4)) {
                let length = 1 + input.below(8)
                let characters = (0..<length).map { _ in Self.pathCharacters[input.below(Self.pathCharacters.count)] }
                let element = String(decoding: characters, as: UTF8.self)
                elements.append(input.oneIn(3) ? "dev_" + element : element)
            }
        }
        return (try? ObjectPath("/" + elements.joined(separator: "/"))) ?? .root
    }

    /// The value of property `name`: usually of bluetoothd's type, sometimes of any type,
    /// sometimes inside one more variant (the caller puts it in the a{sv} variant).
    mutating func property(_ name: String, _ input: inout FuzzInput) -> DBusValue {
        let type = input.oneIn(5) ? Self.types[input.below(Self.types.count)] : Self.propertyTypes[name] ?? "s"
        let value = value(ofType: type, &input)
        return input.oneIn(10) ? .variant(value) : value
    }

    /// `a{sv}` entries: known property names (and others), values in variants; keys may repeat.
    mutating func propertyEntries(_ input: inout FuzzInput) -> [DBusValue.DictionaryEntry] {
        (0..<(budget > 0 ? input.below(12) : 0)).map { _ in
            let name = input.oneIn(10) ? text(&input) : Self.propertyNames[input.below(Self.propertyNames.count)]
            return DBusValue.DictionaryEntry(.string(name), .variant(property(name, &input)))
        }
    }

    /// A value of one of `types`.
    mutating func value(ofType type: String, _ input: inout FuzzInput) -> DBusValue {
        budget -= 1
        let isContainer = type.utf8.count > 1 || type == "v"
        if isContainer { depth += 1 }
        defer { if isContainer { depth -= 1 } }
        let count = budget > 0 ? input.below(input.oneIn(8) ? 40 : 5) : 0
        switch type {
        case "s": return .string(text(&input))
        case "o": return .objectPath(objectPath(&input))
        case "b": return .bool(input.oneIn(2))
        case "n": return .int16(Int16(bitPattern: input.uint16()))
        case "q": return .uint16(input.uint16())
        case "y": return .byte(input.byte())
        case "u": return .uint32(input.uint32())
        case "i": return .int32(Int32(bitPattern: input.uint32()))
        case "x": return .int64(Int64(bitPattern: input.uint64()))
        case "t": return .uint64(input.uint64())
        // Whole numbers only: NaN would make the equality oracles fail for nothing.
        case "d": return .double(Double(Int16(bitPattern: input.uint16())))
        case "g": return .signature(["", "s", "a{sv}", "ay"][input.below(4)])
        case "ay": return .bytes(input.take(count * (input.oneIn(4) ? 8 : 1)))
        case "as": return .array(element: "s", (0..<count).map { _ in .string(text(&input)) })
        case "ao": return .array(element: "o", (0..<count).map { _ in .objectPath(objectPath(&input)) })
        case "av": return .array(element: "v", (0..<count).map { _ in .variant(any(&input)) })
        case "aay": return .array(element: "ay", (0..<count).map { _ in value(ofType: "ay", &input) })
        case "a{qv}":
            return .dictionary(
                key: "q", value: "v",
                (0..<count).map { _ in .init(.uint16(input.uint16() % 4), .variant(bytesOrAny(&input))) })
        case "a{yv}":
            return .dictionary(
                key: "y", value: "v",
                (0..<count).map { _ in .init(.byte(input.byte() % 8), .variant(bytesOrAny(&input))) })
        case "a{sv}":
            return .dictionary(
                key: "s", value: "v",
                (0..<count).map { _ in .init(.string(text(&input)), .variant(bytesOrAny(&input))) })
        case "a{ss}":
            return .dictionary(
                key: "s", value: "s", (0..<count).map { _ in .init(.string(text(&input)), .string(text(&input))) })
        case "a{sa{sv}}":
            return .dictionary(
                key: "s", value: "a{sv}",
                (0..<count).map { _ in
                    .init(
                        .string(Self.interfaces[input.below(Self.interfaces.count)]),
                        .dictionary(
                            key: "s", value: "v", propertyEntries(&input)))
                })
        case "(sq)": return .structure([.string(text(&input)), .uint16(input.uint16())])
        default: return .variant(any(&input))
        }
    }

    /// Usually `ay` (what bluetoothd puts in these variants), sometimes anything.
    mutating func bytesOrAny(_ input: inout FuzzInput) -> DBusValue {
        input.oneIn(4) ? any(&input) : value(ofType: "ay", &input)
    }

    /// A value of any of `types` (only basic ones once the budget is spent or deep down).
    mutating func any(_ input: inout FuzzInput) -> DBusValue {
        value(ofType: Self.types[input.below(budget > 0 && depth < 8 ? Self.types.count : 12)], &input)
    }
}
