import CDBus
import Testing

@testable import DBus

/// `DBusMessage.bytesPropertyChanged`, the short way a changed value is built (written in the
/// wire format by hand): the same message as the general path, and byte for byte the message a C
/// program builds with libdbus's iterators, for every length and alignment a value, path and
/// property name may have.
@Suite(.timeLimit(.minutes(5))) struct BytesPropertyChangedTests {
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

    /// The message as a C program builds it with libdbus's iterators, the destination set after
    /// the body (so that its header field comes last, as in the hand-written one).
    static func builtWithIterators(
        path: String, interface: String = characteristic.rawValue, property: String, value: [UInt8],
        destination: String?
    ) throws -> DBusMessage {
        let raw = try #require(dbus_message_new_signal(path, "org.freedesktop.DBus.Properties", "PropertiesChanged"))
        let message = DBusMessage(owning: raw)
        var body = DBusMessageIter()
        var dictionary = DBusMessageIter()
        var entry = DBusMessageIter()
        var variant = DBusMessageIter()
        var array = DBusMessageIter()
        var invalidated = DBusMessageIter()
        var ok = true
        interface.withCString { interfaceName in
            property.withCString { propertyName in
                var zero: UInt8 = 0
                value.withUnsafeBufferPointer { bytes in
                    withUnsafePointer(to: &zero) { empty in
                        var interfacePointer: UnsafePointer<CChar>? = interfaceName
                        var propertyPointer: UnsafePointer<CChar>? = propertyName
                        var start: UnsafePointer<UInt8>? = bytes.baseAddress ?? empty
                        dbus_message_iter_init_append(raw, &body)
                        ok = ok && dbus_message_iter_append_basic(&body, CDBUS_TYPE_STRING, &interfacePointer) != 0
                        ok = ok && dbus_message_iter_open_container(&body, CDBUS_TYPE_ARRAY, "{sv}", &dictionary) != 0
                        ok =
                            ok && dbus_message_iter_open_container(&dictionary, CDBUS_TYPE_DICT_ENTRY, nil, &entry) != 0
                        ok = ok && dbus_message_iter_append_basic(&entry, CDBUS_TYPE_STRING, &propertyPointer) != 0
                        ok = ok && dbus_message_iter_open_container(&entry, CDBUS_TYPE_VARIANT, "ay", &variant) != 0
                        ok = ok && dbus_message_iter_open_container(&variant, CDBUS_TYPE_ARRAY, "y", &array) != 0
                        ok =
                            ok
                            && dbus_message_iter_append_fixed_array(
                                &array, CDBUS_TYPE_BYTE, &start, Int32(bytes.count)) != 0
                        ok = ok && dbus_message_iter_close_container(&variant, &array) != 0
                        ok = ok && dbus_message_iter_close_container(&entry, &variant) != 0
                        ok = ok && dbus_message_iter_close_container(&dictionary, &entry) != 0
                        ok = ok && dbus_message_iter_close_container(&body, &dictionary) != 0
                        ok = ok && dbus_message_iter_open_container(&body, CDBUS_TYPE_ARRAY, "s", &invalidated) != 0
                        ok = ok && dbus_message_iter_close_container(&body, &invalidated) != 0
                    }
                }
            }
        }
        try #require(ok)
        if let destination { try #require(dbus_message_set_destination(raw, destination) != 0) }
        return message
    }

    /// Every length of value up to 40 (each alignment of what follows it), paths, interface and
    /// property names of each length modulo 8 (each padding of the header fields and of the
    /// dictionary entry), with and without a destination.
    @Test(arguments: [nil, ":1.42", "org.bluez"])
    func byteForByteWhatLibdbusBuilds(destination: String?) throws {
        for interface in ["org.bluez.GattCharacteristic1", "org.bluez.GattDescriptor1", "a.b", "a.bc"] {
            try byteForByte(interface: interface, destination: destination)
        }
    }

    private func byteForByte(interface: String, destination: String?) throws {
        for pathLength in 0..<8 {
            let path = "/org/bluezkit/app1/service0001/char" + String(repeating: "7", count: pathLength + 1)
            for property in ["V", "Va", "Val", "Valu", "Value", "Values", "Values_", "ValueNow"] {
                for length in 0...40 {
                    let value = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ pathLength) }
                    let short = try DBusMessage.bytesPropertyChanged(
                        path: ObjectPath(trusted: path), interface: InterfaceName(trusted: interface),
                        property: property, value: value, destination: destination.map { BusName(trusted: $0) })
                    let reference = try Self.builtWithIterators(
                        path: path, interface: interface, property: property, value: value, destination: destination)
                    #expect(short.serial == 0, "the connection sets the serial")
                    guard try short.marshalled() == reference.marshalled() else {
                        Issue.record("differs: \(interface), path \(path), property \(property), \(length) bytes")
                        return
                    }
                }
            }
        }
    }

    @Test func aValueOf64KiBIsTheSameMessageToo() throws {
        let value = (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let short = try DBusMessage.bytesPropertyChanged(
            path: Self.charPath, interface: Self.characteristic, property: "Value", value: value,
            destination: ":1.42")
        let reference = try Self.builtWithIterators(
            path: Self.charPath.rawValue, property: "Value", value: value, destination: ":1.42")
        #expect(try short.marshalled() == reference.marshalled())
    }

    /// Names libdbus would refuse (a bad path or destination, which the trusted initializers let
    /// through) give a typed error with libdbus's reason, never a crash.
    @Test func namesLibdbusRefusesAreAnError() throws {
        for (path, destination) in [("no/slash", ":1.1"), ("/trailing/", ":1.1"), ("/ok", "bad..name")] {
            #expect(throws: DBusError.self, "\(path) \(destination)") {
                try DBusMessage.bytesPropertyChanged(
                    path: ObjectPath(trusted: path), interface: Self.characteristic, property: "Value",
                    value: [1], destination: BusName(trusted: destination))
            }
        }
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
