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
    /// Returns the bytes with one copy and no generic value tree, or nil when
    /// the message has any other shape (then use `propertiesChange()`).
    package func propertiesChangedValueBytes(of interface: InterfaceName) -> [UInt8]? {
        guard dbus_message_has_signature(raw, "sa{sv}as") != 0 else { return nil }
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return nil }
        var name: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &name)
        guard let name, interface.rawValue.withCString({ strcmp(name, $0) }) == 0 else { return nil }
        dbus_message_iter_next(&iter)
        var dict = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &dict)
        guard dbus_message_iter_get_arg_type(&dict) == CDBUS_TYPE_DICT_ENTRY else { return nil }
        var entry = DBusMessageIter()
        dbus_message_iter_recurse(&dict, &entry)
        var key: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&entry, &key)
        guard let key, strcmp(key, "Value") == 0 else { return nil }
        dbus_message_iter_next(&entry)
        var variant = DBusMessageIter()
        dbus_message_iter_recurse(&entry, &variant)
        guard dbus_message_iter_get_arg_type(&variant) == CDBUS_TYPE_ARRAY,
            dbus_message_iter_get_element_type(&variant) == CDBUS_TYPE_BYTE
        else { return nil }
        // Only one changed property and nothing invalidated.
        guard dbus_message_iter_next(&dict) == 0 else { return nil }
        dbus_message_iter_next(&iter)
        guard dbus_message_iter_get_element_count(&iter) == 0 else { return nil }
        var bytes = DBusMessageIter()
        dbus_message_iter_recurse(&variant, &bytes)
        return DBusValue.readFixedBytes(&bytes)
    }

    /// The first argument when it is a string (for `arg0` matching), without decoding the rest.
    var firstStringArgument: String? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0, dbus_message_iter_get_arg_type(&iter) == CDBUS_TYPE_STRING
        else { return nil }
        return DBusValue.readString(&iter)
    }
}
