internal import CDBus

extension DBusMessage {
    /// `PropertiesChanged(interface, {property: <ay value>}, [])` from `path`, to `destination`
    /// when given: one byte-array property that changed, the shape of every GATT notification
    /// a peripheral sends through bluetoothd.
    ///
    /// Built with libdbus's iterators directly, as a C program would: the body's signature
    /// (`sa{sv}as`) is fixed and valid, so none of the general path's work (``DBusValue``s,
    /// a dictionary, validating each signature with libdbus) is needed. The names are
    /// validated types already; only `property` is checked (no NUL character).
    /// - Throws: ``DBusError`` `invalidArgs` for a NUL in `property` or a value over 64 MiB,
    ///   `noMemory`.
    package static func bytesPropertyChanged(
        path: ObjectPath, interface: InterfaceName, property: String, value: [UInt8], destination: BusName?
    ) throws(DBusError) -> DBusMessage {
        guard !property.containsNUL else { throw DBusError(.invalidArgs, "string contains a NUL character") }
        // libdbus's limit for one array (2^26 bytes); beyond it, it would abort.
        guard value.count <= 1 << 26 else { throw DBusError(.invalidArgs, "an array longer than 64 MiB") }
        guard let raw = newSignal(path: path, interface: .properties, member: propertiesChangedMember) else {
            throw DBusError(.noMemory, "cannot allocate a signal")
        }
        let message = DBusMessage(owning: raw)
        let ok = interface.rawValue.withCString { interfaceName in
            property.withCString { propertyName in
                value.withUnsafeBufferPointer { bytes in
                    Self.appendBytesPropertyChanged(raw, interfaceName, propertyName, bytes)
                }
            }
        }
        guard ok else { throw DBusError(.noMemory, "cannot build a PropertiesChanged signal") }
        // After the body: closing the body's containers rewrites the header's signature field,
        // which costs libdbus about three times as much with a destination field before it.
        if let destination, destination.rawValue.withCString({ dbus_message_set_destination(raw, $0) }) == 0 {
            throw DBusError(.noMemory, "cannot address a signal")
        }
        return message
    }

    /// Appends `s`, `a{sv}` with one entry holding `ay`, and an empty `as`; false when libdbus
    /// runs out of memory (a container left open then is abandoned with the message).
    private static func appendBytesPropertyChanged(
        _ raw: OpaquePointer, _ interface: UnsafePointer<CChar>, _ property: UnsafePointer<CChar>,
        _ bytes: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        var body = DBusMessageIter()
        var dictionary = DBusMessageIter()
        var entry = DBusMessageIter()
        var variant = DBusMessageIter()
        var array = DBusMessageIter()
        var invalidated = DBusMessageIter()
        var interfaceName: UnsafePointer<CChar>? = interface
        var propertyName: UnsafePointer<CChar>? = property
        // libdbus wants a valid pointer even for no bytes.
        var zero: UInt8 = 0
        return withUnsafePointer(to: &zero) { empty in
            var start: UnsafePointer<UInt8>? = bytes.baseAddress ?? empty
            dbus_message_iter_init_append(raw, &body)
            var ok = dbus_message_iter_append_basic(&body, CDBUS_TYPE_STRING, &interfaceName) != 0
            ok = ok && dbus_message_iter_open_container(&body, CDBUS_TYPE_ARRAY, "{sv}", &dictionary) != 0
            ok = ok && dbus_message_iter_open_container(&dictionary, CDBUS_TYPE_DICT_ENTRY, nil, &entry) != 0
            ok = ok && dbus_message_iter_append_basic(&entry, CDBUS_TYPE_STRING, &propertyName) != 0
            ok = ok && dbus_message_iter_open_container(&entry, CDBUS_TYPE_VARIANT, "ay", &variant) != 0
            ok = ok && dbus_message_iter_open_container(&variant, CDBUS_TYPE_ARRAY, "y", &array) != 0
            ok =
                ok
                && dbus_message_iter_append_fixed_array(&array, CDBUS_TYPE_BYTE, &start, Int32(bytes.count)) != 0
            ok = ok && dbus_message_iter_close_container(&variant, &array) != 0
            ok = ok && dbus_message_iter_close_container(&entry, &variant) != 0
            ok = ok && dbus_message_iter_close_container(&dictionary, &entry) != 0
            ok = ok && dbus_message_iter_close_container(&body, &dictionary) != 0
            ok = ok && dbus_message_iter_open_container(&body, CDBUS_TYPE_ARRAY, "s", &invalidated) != 0
            ok = ok && dbus_message_iter_close_container(&body, &invalidated) != 0
            return ok
        }
    }
}
