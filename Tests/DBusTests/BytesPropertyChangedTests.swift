import CDBus
import Testing

@testable import DBus

/// `DBusMessage.bytesPropertyChanged`, the short way a changed value is built: the same message
/// as the general path, byte for byte in its body, for every length a value may have.
@Suite struct BytesPropertyChangedTests {
    static let characteristic: InterfaceName = "org.bluez.GattCharacteristic1"
    static let charPath = ObjectPath(trusted: "/org/bluezkit/app1/service0000/char0")

    static func general(_ value: [UInt8], destination: BusName?) throws -> DBusMessage {
        try DBusMessage.signal(
            path: charPath, interface: .properties, member: "PropertiesChanged", destination: destination,
            arguments: [
                .string(characteristic.rawValue), .stringVariantDictionary(["Value": .bytes(value)]),
                .stringArray([]),
            ])
    }

    /// The marshalled body, as it would go on the wire.
    static func body(_ message: DBusMessage) -> [UInt8] {
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(message.raw, &bytes, &length) != 0, let bytes else { return [] }
        defer { dbus_free(bytes) }
        // The header ends at an 8-byte boundary after its fields; the body is the last
        // `body length` bytes (the header's 32-bit field at offset 4, little endian here).
        let all = UnsafeBufferPointer(
            start: UnsafeRawPointer(bytes).assumingMemoryBound(to: UInt8.self), count: Int(length))
        let bodyLength = Int(all[4]) | Int(all[5]) << 8 | Int(all[6]) << 16 | Int(all[7]) << 24
        return Array(all.suffix(bodyLength))
    }

    @Test(arguments: [0, 1, 20, 244, 512, 4096])
    func theSameMessageAsTheGeneralPath(length: Int) throws {
        let value = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let short = try DBusMessage.bytesPropertyChanged(
            path: Self.charPath, interface: Self.characteristic, property: "Value", value: value,
            destination: ":1.42")
        let general = try Self.general(value, destination: ":1.42")
        #expect(short.kind == .signal)
        #expect(short.path == Self.charPath)
        #expect(short.interface == .properties)
        #expect(short.member?.rawValue == "PropertiesChanged")
        #expect(short.destination?.rawValue == ":1.42")
        #expect(short.signature == general.signature)
        #expect(try short.arguments() == general.arguments())
        #expect(short.propertiesChangedValueBytes(of: Self.characteristic) == value)
        #expect(Self.body(short) == Self.body(general))
    }

    @Test func noDestinationAndBadInputAreHandled() throws {
        let broadcast = try DBusMessage.bytesPropertyChanged(
            path: Self.charPath, interface: Self.characteristic, property: "Value", value: [1], destination: nil)
        #expect(broadcast.destination == nil)
        #expect(throws: DBusError.self) {
            try DBusMessage.bytesPropertyChanged(
                path: Self.charPath, interface: Self.characteristic, property: "Val\0ue", value: [1], destination: nil)
        }
    }
}
