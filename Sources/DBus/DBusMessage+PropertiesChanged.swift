internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// The body of `org.freedesktop.DBus.Properties.PropertiesChanged`, decoded.
package struct PropertiesChange: Sendable, Hashable {
    package var interface: String
    package var changed: [String: DBusValue]
    package var invalidated: [String]
}

extension DBusMessage {
    package static let propertiesChangedMember = MemberName(trusted: "PropertiesChanged")

    /// True for a `PropertiesChanged` signal.
    package var isPropertiesChanged: Bool {
        kind == .signal && isMember(Self.propertiesChangedMember, of: .properties)
    }

    /// Decodes a `PropertiesChanged` signal (`sa{sv}as`); nil when the body has another shape.
    package func propertiesChange() -> PropertiesChange? {
        guard dbus_message_has_signature(raw, "sa{sv}as") != 0,
            let args = try? arguments(), args.count == 3,
            let interface = args[0].stringValue, let changed = args[1].stringKeyedDictionary,
            let invalidated = args[2].stringArrayValue
        else { return nil }
        return PropertiesChange(
            interface: interface, changed: changed.mapValues(\.unwrappingVariants), invalidated: invalidated)
    }

    /// The fast path for the hottest message on a BLE central: a `PropertiesChanged`
    /// of `interface` whose only change is `{"Value": <ay>}` with nothing invalidated.
    ///
    /// Returns the bytes with no generic value tree, or nil when the message has any other
    /// shape (then use `propertiesChange()`). The body is read from its wire form
    /// (`dbus_message_marshal`, one copy) rather than with libdbus's iterators: about 2,700
    /// instructions a value instead of 3,900 (callgrind), most of them libdbus's copy.
    package func propertiesChangedValueBytes(of interface: InterfaceName) -> [UInt8]? {
        guard dbus_message_has_signature(raw, "sa{sv}as") != 0 else { return nil }
        let bytes = try? withMarshalledBody { (body, bigEndian) throws(DBusError) -> [UInt8]? in
            var reader = ValueChangeReader(body: body, bigEndian: bigEndian)
            return reader.onlyValueBytes(of: interface)
        }
        return bytes ?? nil
    }

    /// The first argument when it is a string (for `arg0` matching), without decoding the rest.
    var firstStringArgument: String? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0, dbus_message_iter_get_arg_type(&iter) == CDBUS_TYPE_STRING
        else { return nil }
        return DBusValue.readString(&iter)
    }
}

/// Reads the one shape `propertiesChangedValueBytes(of:)` answers for from a marshalled body:
/// the primitives of `DBusBodyReader` (bounds, zero padding, terminated strings), without its
/// type table, which would cost more to carry than this whole read.
struct ValueChangeReader {
    let body: UnsafeRawBufferPointer
    let bigEndian: Bool
    var position = 0

    /// `(interface, {"Value": <ay>}, [])` gives the bytes; any other shape nil; a malformed
    /// body (past the end, non-zero padding, an unterminated string) nil too.
    mutating func onlyValueBytes(of interface: InterfaceName) -> [UInt8]? {
        guard let name = string(), Self.same(name, interface.rawValue),
            let changedLength = uint32(), align(8), changedLength <= body.count - position
        else { return nil }
        let changedEnd = position + changedLength
        guard let key = string(), Self.same(key, "Value"), let signature = signature(),
            signature.count == 2, signature[0] == UInt8(ascii: "a"), signature[1] == UInt8(ascii: "y"),
            let valueLength = uint32(), valueLength <= changedEnd - position
        else { return nil }
        let value = [UInt8](UnsafeRawBufferPointer(rebasing: body[position..<position + valueLength]))
        position += valueLength
        // Nothing else changed, nothing invalidated, nothing after.
        guard position == changedEnd, uint32() == 0, position == body.count else { return nil }
        return value
    }

    /// Skips the padding to `alignment` (zero bytes); false past the end or on a non-zero byte.
    private mutating func align(_ alignment: Int) -> Bool {
        let aligned = (position + alignment - 1) & ~(alignment - 1)
        guard aligned <= body.count else { return false }
        while position < aligned {
            guard body[position] == 0 else { return false }
            position += 1
        }
        return true
    }

    private mutating func uint32() -> Int? {
        guard align(4), body.count - position >= 4 else { return nil }
        let raw = body.loadUnaligned(fromByteOffset: position, as: UInt32.self)
        position += 4
        return Int(bigEndian ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw))
    }

    /// A string (`s`) without its NUL; nil when it runs past the end or lacks the NUL.
    private mutating func string() -> UnsafeRawBufferPointer? {
        guard let length = uint32() else { return nil }
        return characters(length)
    }

    /// A signature (`g`: 8-bit length) without its NUL.
    private mutating func signature() -> UnsafeRawBufferPointer? {
        guard position < body.count else { return nil }
        let length = Int(body[position])
        position += 1
        return characters(length)
    }

    private mutating func characters(_ length: Int) -> UnsafeRawBufferPointer? {
        guard length < body.count - position, body[position + length] == 0 else { return nil }
        defer { position += length + 1 }
        return UnsafeRawBufferPointer(rebasing: body[position..<position + length])
    }

    /// Whether `bytes` are the UTF-8 of `text` (one `memcmp`; comparing the string's UTF-8
    /// view element by element cost about 1,500 instructions for an interface name).
    private static func same(_ bytes: UnsafeRawBufferPointer, _ text: String) -> Bool {
        let equal = text.utf8.withContiguousStorageIfAvailable { utf8 in
            guard utf8.count == bytes.count else { return false }
            guard let left = utf8.baseAddress, let right = bytes.baseAddress else { return true }
            return memcmp(left, right, bytes.count) == 0
        }
        return equal ?? text.utf8.elementsEqual(bytes)
    }
}
