import Testing

@testable import DBus

/// `ValueChangeReader`, the wire-format read behind `propertiesChangedValueBytes(of:)`:
/// the same answer as the general decoder for every shape, in both byte orders, and nil —
/// never a trap or a read past the buffer — for bodies cut short or tampered with.
@Suite(.timeLimit(.minutes(5))) struct ValueChangeReaderTests {
    static let characteristic: InterfaceName = "org.bluez.GattCharacteristic1"

    static func read(_ body: [UInt8], bigEndian: Bool = false, of interface: InterfaceName = characteristic)
        -> [UInt8]?
    {
        body.withUnsafeBytes { buffer in
            var reader = ValueChangeReader(body: buffer, bigEndian: bigEndian)
            return reader.onlyValueBytes(of: interface)
        }
    }

    /// A `PropertiesChanged` body as `TestMarshaller` writes it, in either byte order.
    static func body(_ arguments: [DBusValue], bigEndian: Bool) -> [UInt8] {
        var marshaller = TestMarshaller(bigEndian: bigEndian)
        for argument in arguments { marshaller.write(argument) }
        return marshaller.bytes
    }

    static func arguments(interface: String, _ changed: [DBusValue.DictionaryEntry], invalidated: [String] = [])
        -> [DBusValue]
    {
        [.string(interface), .dictionary(key: "s", value: "v", changed), .stringArray(invalidated)]
    }

    static func value(_ bytes: [UInt8]) -> DBusValue.DictionaryEntry {
        .init(.string("Value"), .variant(.bytes(bytes)))
    }

    /// What the general decoder says the fast path should answer.
    static func expected(_ message: DBusMessage, interface: InterfaceName = characteristic) -> [UInt8]? {
        guard let change = message.propertiesChange(), change.interface == interface.rawValue,
            change.invalidated.isEmpty, change.changed.count == 1, case .bytes(let bytes)? = change.changed["Value"]
        else { return nil }
        // `propertiesChange()` unwraps nested variants; the fast path takes `<ay>` only.
        guard let arguments = try? message.arguments(), case .dictionary(_, _, let entries) = arguments[1],
            case .variant(.bytes)? = entries.first?.value
        else { return nil }
        return bytes
    }

    @Test func agreesWithTheGeneralDecoderOnEveryShape() throws {
        let lengths = Array(0...20) + [255, 256, 4096]
        var shapes: [(String, [DBusValue])] = []
        for interface in ["org.bluez.GattCharacteristic1", "org.bluez.GattDescriptor1", "a.b", "org.bluez.Gatt"] {
            for length in lengths {
                let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
                shapes.append(("\(interface) \(length)", Self.arguments(interface: interface, [Self.value(bytes)])))
            }
        }
        let other: [(String, [DBusValue])] = [
            (
                "key Valu",
                Self.arguments(interface: Self.characteristic.rawValue, [.init(.string("Valu"), .variant(.bytes([1])))])
            ),
            (
                "key ValueX",
                Self.arguments(
                    interface: Self.characteristic.rawValue, [.init(.string("ValueX"), .variant(.bytes([1])))])
            ),
            (
                "key value",
                Self.arguments(
                    interface: Self.characteristic.rawValue, [.init(.string("value"), .variant(.bytes([1])))])
            ),
            (
                "interface with a suffix",
                Self.arguments(interface: Self.characteristic.rawValue + "X", [Self.value([1])])
            ),
            ("interface cut short", Self.arguments(interface: "org.bluez.GattCharacteristic", [Self.value([1])])),
            (
                "two entries",
                Self.arguments(
                    interface: Self.characteristic.rawValue,
                    [Self.value([1]), .init(.string("Notifying"), .variant(.bool(true)))])
            ),
            (
                "Value second",
                Self.arguments(
                    interface: Self.characteristic.rawValue,
                    [.init(.string("Notifying"), .variant(.bool(true))), Self.value([1])])
            ),
            (
                "invalidated",
                Self.arguments(interface: Self.characteristic.rawValue, [Self.value([1])], invalidated: ["Flags"])
            ),
            ("empty", Self.arguments(interface: Self.characteristic.rawValue, [])),
            (
                "as value",
                Self.arguments(
                    interface: Self.characteristic.rawValue, [.init(.string("Value"), .variant(.stringArray(["a"])))])
            ),
            (
                "ai value",
                Self.arguments(
                    interface: Self.characteristic.rawValue,
                    [.init(.string("Value"), .variant(.array(element: "i", [.int32(1)])))])
            ),
            (
                "byte value",
                Self.arguments(interface: Self.characteristic.rawValue, [.init(.string("Value"), .variant(.byte(1)))])
            ),
            (
                "nested variant",
                Self.arguments(
                    interface: Self.characteristic.rawValue, [.init(.string("Value"), .variant(.variant(.bytes([1]))))])
            ),
        ]
        var answered = 0
        for (label, arguments) in shapes + other {
            let message = try DBusMessage.signal(
                path: path("/org/bluez/hci0/dev_AA/service1/char2"), interface: .properties,
                member: "PropertiesChanged", arguments: arguments)
            let expected = Self.expected(message)
            #expect(message.propertiesChangedValueBytes(of: Self.characteristic) == expected, "\(label)")
            // The test marshaller writes what libdbus writes; big-endian bodies read the same.
            let (libdbusBody, _) = try DBusBodyDecoderTests.body(of: message)
            #expect(Self.body(arguments, bigEndian: false) == libdbusBody, "\(label)")
            #expect(
                Self.read(Self.body(arguments, bigEndian: true), bigEndian: true) == expected, "\(label) big-endian")
            if expected != nil { answered += 1 }
        }
        // Every one of the well-shaped characteristic bodies, none of the others.
        #expect(answered == lengths.count)
    }

    @Test func everyCutOrTamperedBodyGivesNil() {
        for bigEndian in [false, true] {
            let arguments = Self.arguments(interface: Self.characteristic.rawValue, [Self.value([6, 0x48, 0, 1, 2])])
            let body = Self.body(arguments, bigEndian: bigEndian)
            #expect(Self.read(body, bigEndian: bigEndian) == [6, 0x48, 0, 1, 2])
            #expect(Self.read(body, bigEndian: !bigEndian) == nil, "the other byte order")
            for length in 0..<body.count {
                #expect(Self.read(Array(body[..<length]), bigEndian: bigEndian) == nil, "cut to \(length)")
            }
            #expect(Self.read(body + [0], bigEndian: bigEndian) == nil, "a byte after the body")
            // The padding after the interface name (to the dictionary's length, then its entries).
            let name = Self.characteristic.rawValue.utf8.count
            let padding = Array((4 + name + 1)..<((4 + name + 1 + 3) & ~3))
            #expect(!padding.isEmpty)
            for index in padding {
                var tampered = body
                tampered[index] = 1
                #expect(Self.read(tampered, bigEndian: bigEndian) == nil, "padding byte \(index)")
            }
            // Where each length and each terminating NUL is (the layout of `sa{sv}as`).
            let align = { (offset: Int, alignment: Int) in (offset + alignment - 1) & ~(alignment - 1) }
            let changedLength = align(4 + name + 1, 4)
            let key = align(changedLength + 4, 8)
            let signature = key + 4 + 5 + 1
            let valueLength = align(signature + 4, 4)
            #expect(Array(body[(key + 4)..<(key + 9)]) == Array("Value".utf8))
            #expect(Array(body[signature..<(signature + 3)]) == [2, UInt8(ascii: "a"), UInt8(ascii: "y")])
            for index in [0, changedLength, key, valueLength] {
                var huge = body
                for offset in 0..<4 { huge[index + offset] = 0xFF }
                #expect(Self.read(huge, bigEndian: bigEndian) == nil, "length at \(index) made huge")
            }
            for index in [4 + name, key + 4 + 5, signature + 3] {
                #expect(body[index] == 0)
                var unterminated = body
                unterminated[index] = UInt8(ascii: "x")
                #expect(Self.read(unterminated, bigEndian: bigEndian) == nil, "NUL at \(index) replaced")
            }
        }
    }
}
