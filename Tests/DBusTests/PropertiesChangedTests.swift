import Testing

@testable import DBus

/// `PropertiesChanged` decoding: the general `propertiesChange()` and the
/// fast path `propertiesChangedValueBytes(of:)`, which answers only for the
/// exact shape `("iface", {"Value": <ay>}, [])`.
@Suite(.timeLimit(.minutes(5))) struct PropertiesChangedTests {
    static let characteristic: InterfaceName = "org.bluez.GattCharacteristic1"

    static func signal(
        _ arguments: [DBusValue], interface: InterfaceName = .properties, member: MemberName = "PropertiesChanged"
    ) throws -> DBusMessage {
        try DBusMessage.signal(
            path: path("/org/bluez/hci0/dev_AA/service1/char2"), interface: interface, member: member,
            arguments: arguments)
    }

    static func changed(
        _ values: [String: DBusValue], invalidated: [String] = [], interface: String = characteristic.rawValue
    ) throws -> DBusMessage {
        try signal([.string(interface), .stringVariantDictionary(values), .stringArray(invalidated)])
    }

    /// The decoded form of a characteristic's change.
    static func change(
        _ changed: [String: DBusValue], invalidated: [String] = [], interface: String = characteristic.rawValue
    ) -> PropertiesChange {
        PropertiesChange(interface: interface, changed: changed, invalidated: invalidated)
    }

    @Test func exactShapeGivesTheBytes() throws {
        let message = try Self.changed(["Value": .bytes([0x06, 0x48, 0x00])])
        #expect(message.isPropertiesChanged)
        #expect(message.propertiesChangedValueBytes(of: Self.characteristic) == [0x06, 0x48, 0x00])
        #expect(message.propertiesChange() == Self.change(["Value": .bytes([0x06, 0x48, 0x00])]))
        // An empty value is still a value.
        #expect(try Self.changed(["Value": .bytes([])]).propertiesChangedValueBytes(of: Self.characteristic) == [])
        let large = (0..<512).map { UInt8(truncatingIfNeeded: $0) }
        #expect(
            try Self.changed(["Value": .bytes(large)]).propertiesChangedValueBytes(of: Self.characteristic) == large)
    }

    @Test func otherShapesGiveNilButStillDecode() throws {
        let cases: [(String, [String: DBusValue], [String], String)] = [
            ("extra key", ["Value": .bytes([1]), "Notifying": .bool(true)], [], Self.characteristic.rawValue),
            ("other key only", ["Notifying": .bool(true)], [], Self.characteristic.rawValue),
            ("value of another type", ["Value": .string("01")], [], Self.characteristic.rawValue),
            ("value as an int array", ["Value": .array(element: "i", [.int32(1)])], [], Self.characteristic.rawValue),
            ("other interface", ["Value": .bytes([1])], [], "org.bluez.Device1"),
            ("invalidated", ["Value": .bytes([1])], ["Value"], Self.characteristic.rawValue),
            ("nothing changed", [:], ["Value"], Self.characteristic.rawValue),
        ]
        for (label, changed, invalidated, interface) in cases {
            let message = try Self.changed(changed, invalidated: invalidated, interface: interface)
            #expect(message.propertiesChangedValueBytes(of: Self.characteristic) == nil, "\(label)")
            #expect(
                message.propertiesChange() == Self.change(changed, invalidated: invalidated, interface: interface),
                "\(label)")
        }
    }

    @Test func variantInsideTheVariantIsNotTheFastPath() throws {
        // {"Value": <<ay>>}: decoded (unwrapped) by the general path only.
        let message = try Self.signal([
            .string(Self.characteristic.rawValue),
            .dictionary(key: "s", value: "v", [.init(.string("Value"), .variant(.variant(.bytes([5]))))]),
            .stringArray([]),
        ])
        #expect(message.propertiesChangedValueBytes(of: Self.characteristic) == nil)
        #expect(message.propertiesChange()?.changed["Value"] == .bytes([5]))
    }

    @Test func wrongBodiesGiveNilEverywhere() throws {
        let bodies: [[DBusValue]] = [
            [],
            [.string(Self.characteristic.rawValue)],
            [.string(Self.characteristic.rawValue), .stringVariantDictionary(["Value": .bytes([1])])],
            [
                .string(Self.characteristic.rawValue), .stringVariantDictionary(["Value": .bytes([1])]),
                .stringArray([]),
                .byte(0),
            ],
            [
                .string(Self.characteristic.rawValue),
                .dictionary(key: "s", value: "ay", [.init(.string("Value"), .bytes([1]))]), .stringArray([]),
            ],
            [.objectPath(try path("/x")), .stringVariantDictionary(["Value": .bytes([1])]), .stringArray([])],
            [.int32(1), .int32(2), .int32(3)],
        ]
        for body in bodies {
            let message = try Self.signal(body)
            #expect(message.propertiesChangedValueBytes(of: Self.characteristic) == nil, "\(body.map(\.signature))")
            #expect(message.propertiesChange() == nil, "\(body.map(\.signature))")
        }
    }

    @Test func onlyPropertiesChangedSignalsAreRecognised() throws {
        let body: [DBusValue] = [
            .string(Self.characteristic.rawValue), .stringVariantDictionary([:]), .stringArray([]),
        ]
        #expect(try Self.signal(body).isPropertiesChanged)
        #expect(!(try Self.signal(body, member: "InterfacesAdded")).isPropertiesChanged)
        #expect(!(try Self.signal(body, interface: testInterface)).isPropertiesChanged)
        #expect(!(try localCall(body)).isPropertiesChanged)
    }
}
