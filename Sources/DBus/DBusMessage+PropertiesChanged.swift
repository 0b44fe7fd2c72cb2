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

/// Reads the one shape `propertiesChangedValueBytes(of:)` answers for from a marshalled body,
/// through `DBusBodyCursor`'s primitives (bounds, zero padding, terminated strings) and without
/// `DBusBodyReader`'s type table, which would cost more to carry than this whole read.
struct ValueChangeReader: DBusBodyCursor {
    let base: UnsafeRawPointer
    let count: Int
    let bigEndian: Bool
    var position = 0

    init(body: UnsafeRawBufferPointer, bigEndian: Bool) {
        self.base = Self.baseAddress(of: body)
        self.count = body.count
        self.bigEndian = bigEndian
    }

    /// `(interface, {"Value": <ay>}, [])` gives the bytes; any other shape nil; a malformed
    /// body (past the end, non-zero padding, an unterminated string) nil too.
    mutating func onlyValueBytes(of interface: InterfaceName) -> [UInt8]? {
        try? valueBytes(of: interface)
    }

    /// The bytes, nil for another shape; throws for a malformed body.
    private mutating func valueBytes(of interface: InterfaceName) throws(DBusError) -> [UInt8]? {
        guard Self.same(try terminatedBytes(shortLength: false), interface.rawValue) else { return nil }
        let changedLength = Int(try uint32())
        try align(8)
        try need(changedLength)
        let changedEnd = position + changedLength
        guard Self.same(try terminatedBytes(shortLength: false), "Value") else { return nil }
        let signature = try terminatedBytes(shortLength: true)
        guard signature.count == 2, signature[0] == UInt8(ascii: "a"), signature[1] == UInt8(ascii: "y") else {
            return nil
        }
        let valueLength = Int(try uint32())
        guard valueLength <= changedEnd - position else { return nil }
        let value = [UInt8](UnsafeRawBufferPointer(start: base + position, count: valueLength))
        position += valueLength
        // Nothing else changed, nothing invalidated, nothing after.
        guard position == changedEnd, try uint32() == 0, position == count else { return nil }
        return value
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
