internal import CDBus

extension DBusMessage {
    /// `PropertiesChanged(interface, {property: <ay value>}, [])` from `path`, to `destination`
    /// when given: one byte-array property that changed, the shape of every GATT notification
    /// a peripheral sends through bluetoothd.
    ///
    /// Written in the wire format by hand and handed to libdbus whole (`dbus_message_demarshal`,
    /// which validates it, then `dbus_message_copy`, which leaves the serial for the connection to
    /// set when sending): building the same message with libdbus's iterators costs more than
    /// twice as many instructions, most of them rewriting the header's signature and destination
    /// fields as each container closes. The result is byte for byte the message those iterators
    /// build (the header fields in the same order: path, interface, member, signature,
    /// destination; the no-reply flag of every signal).
    /// - Throws: ``DBusError`` `invalidArgs` for a NUL in `property`, a value over 64 MiB or a
    ///   message libdbus refuses (with its reason), `noMemory`.
    package static func bytesPropertyChanged(
        path: ObjectPath, interface: InterfaceName, property: String, value: [UInt8], destination: BusName?
    ) throws(DBusError) -> DBusMessage {
        guard !property.containsNUL else { throw DBusError(.invalidArgs, "string contains a NUL character") }
        // libdbus's limit for one array (2^26 bytes).
        guard value.count <= 1 << 26 else { throw DBusError(.invalidArgs, "an array longer than 64 MiB") }
        let wire = value.withUnsafeBufferPointer { bytes in
            propertiesChangedWire(
                path: path.rawValue, interface: interface.rawValue, property: property, value: bytes,
                destination: destination?.rawValue)
        }
        let parsed = try demarshal(wire)
        // A copy has no serial: the connection gives it the next one of its own when it sends.
        guard let copy = dbus_message_copy(parsed.raw) else { throw DBusError(.noMemory, "cannot copy a signal") }
        return DBusMessage(owning: copy)
    }

    /// The whole signal in the wire format, with serial 1 (libdbus accepts no message without one).
    static func propertiesChangedWire(
        path: String, interface: String, property: String, value: UnsafeBufferPointer<UInt8>, destination: String?
    ) -> [UInt8] {
        let names = path.utf8.count + interface.utf8.count + property.utf8.count + (destination?.utf8.count ?? 0)
        var wire = DBusWireWriter(capacity: 200 + 2 * names + value.count)
        // The fixed header: byte order, type (signal), flags (no reply expected), version 1,
        // the body's length (set below), the serial, then the header fields' array length.
        wire.byte(DBusWireWriter.byteOrderMark)
        wire.byte(UInt8(DBUS_MESSAGE_TYPE_SIGNAL))
        wire.byte(UInt8(DBUS_HEADER_FLAG_NO_REPLY_EXPECTED))
        wire.byte(UInt8(DBUS_MAJOR_PROTOCOL_VERSION))
        wire.uint32(0)
        wire.uint32(1)
        wire.uint32(0)
        let fieldsStart = wire.count
        func field(_ code: Int32, _ type: StaticString, _ write: (inout DBusWireWriter) -> Void) {
            wire.pad(to: 8)
            wire.byte(UInt8(code))
            wire.signature(type)
            write(&wire)
        }
        field(DBUS_HEADER_FIELD_PATH, "o") { $0.string(path) }
        field(DBUS_HEADER_FIELD_INTERFACE, "s") { $0.string(InterfaceName.properties.rawValue) }
        field(DBUS_HEADER_FIELD_MEMBER, "s") { $0.string(DBusMessage.propertiesChangedMember.rawValue) }
        field(DBUS_HEADER_FIELD_SIGNATURE, "g") { $0.signature("sa{sv}as") }
        if let destination { field(DBUS_HEADER_FIELD_DESTINATION, "s") { $0.string(destination) } }
        wire.setUInt32(UInt32(wire.count - fieldsStart), at: 12)
        wire.pad(to: 8)
        let bodyStart = wire.count
        // The body: s, a{sv} with one entry {property: <ay>}, an empty as.
        wire.string(interface)
        wire.uint32(0)
        let dictionaryLength = wire.count - 4
        wire.pad(to: 8)
        let entriesStart = wire.count
        wire.string(property)
        wire.signature("ay")
        wire.uint32(UInt32(value.count))
        wire.append(value)
        wire.setUInt32(UInt32(wire.count - entriesStart), at: dictionaryLength)
        wire.uint32(0)
        wire.setUInt32(UInt32(wire.count - bodyStart), at: 4)
        return wire.bytes
    }
}
