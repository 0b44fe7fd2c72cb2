internal import CDBus

/// The deepest nesting of containers (arrays, structs, dict entries, variants) we write or read.
/// The D-Bus specification allows 32 array and 32 struct levels; we allow 64 in all.
let maximumContainerDepth = 64

// MARK: - Writing

extension DBusValue {
    /// Checks everything libdbus would otherwise abort on (element types of
    /// arrays, dictionary key types, NUL characters in strings, nesting depth)
    /// and returns the value's signature.
    func validatedSignature(depth: Int = 0) throws(DBusError) -> String {
        guard depth <= maximumContainerDepth else {
            throw DBusError(.invalidArgs, "values nested deeper than \(maximumContainerDepth) containers")
        }
        switch self {
        case .string(let s):
            guard !s.containsNUL else { throw DBusError(.invalidArgs, "string contains a NUL character") }
            return "s"
        case .array(let element, let elements):
            guard element.isSingleCompleteType, element.rawValue.first != "{" else {
                throw DBusError(.invalidSignature, "array element signature '\(element)' is not one complete type")
            }
            // libdbus checks arrays of fixed-size values in bulk, without counting a
            // level for their elements: do the same, or a value received from the bus
            // could not be sent back (fuzzer input KNOWN-3).
            let elementDepth = Self.fixedTypeCodes.contains(element.rawValue) ? depth : depth + 1
            for value in elements {
                let signature = try value.validatedSignature(depth: elementDepth)
                guard signature == element.rawValue else {
                    throw DBusError(.invalidArgs, "array of '\(element)' holds a '\(signature)' value")
                }
            }
            return "a" + element.rawValue
        case .dictionary(let key, let value, let entries):
            guard key.isSingleCompleteType, key.rawValue.count == 1, Self.basicTypeCodes.contains(key.rawValue),
                value.isSingleCompleteType
            else {
                throw DBusError(.invalidSignature, "dictionary of '\(key)' to '\(value)' is not valid")
            }
            for entry in entries {
                let keySignature = try entry.key.validatedSignature(depth: depth + 2)
                let valueSignature = try entry.value.validatedSignature(depth: depth + 2)
                guard keySignature == key.rawValue, valueSignature == value.rawValue else {
                    throw DBusError(
                        .invalidArgs, "dictionary of '\(key)\(value)' holds a '\(keySignature)\(valueSignature)' entry")
                }
            }
            return "a{" + key.rawValue + value.rawValue + "}"
        case .structure(let fields):
            guard !fields.isEmpty else { throw DBusError(.invalidArgs, "a structure needs at least one field") }
            var signature = "("
            for field in fields { signature += try field.validatedSignature(depth: depth + 1) }
            return signature + ")"
        case .unixFD(let fd):
            // Checked here, before any container is open: a throw from inside an
            // open libdbus container would leak it.
            guard fd.rawValue >= 0 else { throw DBusError(.invalidArgs, "file descriptor was already taken or closed") }
            return "h"
        case .variant(let inner):
            let innerSignature = try inner.validatedSignature(depth: depth + 1)
            // libdbus aborts on a variant whose signature is invalid (longer
            // than 255, or more than 32 nested arrays or structs).
            guard DBusNameCheck.valid(innerSignature, dbus_signature_validate_single) else {
                throw DBusError(.invalidSignature, "variant signature '\(innerSignature.debugEscaped)' is not valid")
            }
            return "v"
        default:
            return signatureString
        }
    }

    static let fixedTypeCodes: Set<String> = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "h"]

    static let basicTypeCodes: Set<String> = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h"]

    /// Appends this (already validated) value at `iter`. Throws only when libdbus runs out of memory.
    func append(to iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) {
        var ok: dbus_bool_t = 1
        switch self {
        case .byte(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_BYTE, &v)
        case .bool(let b):
            var v: dbus_bool_t = b ? 1 : 0
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_BOOLEAN, &v)
        case .int16(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT16, &v)
        case .uint16(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT16, &v)
        case .int32(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT32, &v)
        case .uint32(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT32, &v)
        case .int64(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT64, &v)
        case .uint64(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT64, &v)
        case .double(var v): ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_DOUBLE, &v)
        case .string(let s): ok = Self.appendString(s, type: CDBUS_TYPE_STRING, iter)
        case .objectPath(let p): ok = Self.appendString(p.rawValue, type: CDBUS_TYPE_OBJECT_PATH, iter)
        case .signature(let g): ok = Self.appendString(g.rawValue, type: CDBUS_TYPE_SIGNATURE, iter)
        case .unixFD(let fd):
            var raw = fd.rawValue
            guard raw >= 0 else { throw DBusError(.invalidArgs, "file descriptor was already taken or closed") }
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UNIX_FD, &raw)
        case .bytes(let bytes):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_ARRAY, "y", &sub) != 0 else { break }
            ok = bytes.withUnsafeBufferPointer { buffer in
                var base = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!
                return withUnsafeMutablePointer(to: &base) {
                    dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, $0, Int32(buffer.count))
                }
            }
            ok &= dbus_message_iter_close_container(iter, &sub)
            return try Self.check(ok)
        case .array(let element, let elements):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_ARRAY, element.rawValue, &sub) != 0 else { break }
            for value in elements { try value.append(to: &sub) }
            ok = dbus_message_iter_close_container(iter, &sub)
        case .dictionary(let key, let value, let entries):
            var sub = DBusMessageIter()
            let entrySignature = "{" + key.rawValue + value.rawValue + "}"
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_ARRAY, entrySignature, &sub) != 0 else { break }
            for entry in entries {
                var pair = DBusMessageIter()
                guard dbus_message_iter_open_container(&sub, CDBUS_TYPE_DICT_ENTRY, nil, &pair) != 0 else {
                    throw DBusError(.noMemory, "out of memory appending a dictionary entry")
                }
                try entry.key.append(to: &pair)
                try entry.value.append(to: &pair)
                try Self.check(dbus_message_iter_close_container(&sub, &pair))
            }
            ok = dbus_message_iter_close_container(iter, &sub)
        case .structure(let fields):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_STRUCT, nil, &sub) != 0 else { break }
            for field in fields { try field.append(to: &sub) }
            ok = dbus_message_iter_close_container(iter, &sub)
        case .variant(let inner):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_VARIANT, inner.signatureString, &sub) != 0 else {
                break
            }
            try inner.append(to: &sub)
            ok = dbus_message_iter_close_container(iter, &sub)
        }
        try Self.check(ok)
    }

    private static func check(_ ok: dbus_bool_t) throws(DBusError) {
        guard ok != 0 else { throw DBusError(.noMemory, "out of memory appending to a message") }
    }

    private static func appendString(_ s: String, type: Int32, _ iter: UnsafeMutablePointer<DBusMessageIter>)
        -> dbus_bool_t
    {
        s.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(iter, type, &pointer)
        }
    }
}

// MARK: - Reading

extension DBusValue {
    /// Reads the value at `iter`. libdbus has validated every received message,
    /// so the types agree with the signature; a type code we do not know
    /// (there are none in D-Bus 1.x) is reported as `invalidArgs`.
    static func read(from iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(iter)
        switch type {
        case CDBUS_TYPE_BYTE:
            var v: UInt8 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .byte(v)
        case CDBUS_TYPE_BOOLEAN:
            var v: dbus_bool_t = 0
            dbus_message_iter_get_basic(iter, &v)
            return .bool(v != 0)
        case CDBUS_TYPE_INT16:
            var v: Int16 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .int16(v)
        case CDBUS_TYPE_UINT16:
            var v: UInt16 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .uint16(v)
        case CDBUS_TYPE_INT32:
            var v: Int32 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .int32(v)
        case CDBUS_TYPE_UINT32:
            var v: UInt32 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .uint32(v)
        case CDBUS_TYPE_INT64:
            var v: Int64 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .int64(v)
        case CDBUS_TYPE_UINT64:
            var v: UInt64 = 0
            dbus_message_iter_get_basic(iter, &v)
            return .uint64(v)
        case CDBUS_TYPE_DOUBLE:
            var v: Double = 0
            dbus_message_iter_get_basic(iter, &v)
            return .double(v)
        case CDBUS_TYPE_STRING:
            return .string(readString(iter))
        case CDBUS_TYPE_OBJECT_PATH:
            return .objectPath(ObjectPath(trusted: readString(iter)))
        case CDBUS_TYPE_SIGNATURE:
            return .signature(DBusSignature(trusted: readString(iter)))
        case CDBUS_TYPE_UNIX_FD:
            var fd: Int32 = -1
            dbus_message_iter_get_basic(iter, &fd)
            return .unixFD(UnixFileDescriptor(owning: fd))
        case CDBUS_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            return .variant(try read(from: &sub))
        case CDBUS_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            return .structure(try readAll(from: &sub))
        case CDBUS_TYPE_ARRAY:
            return try readArray(iter)
        default:
            throw DBusError(.invalidArgs, "unknown D-Bus type code \(type)")
        }
    }

    /// Reads every value from `iter` to the end of its container or message.
    static func readAll(from iter: UnsafeMutablePointer<DBusMessageIter>, capacity: Int = 0) throws(DBusError)
        -> [DBusValue]
    {
        var values: [DBusValue] = []
        values.reserveCapacity(capacity)
        while dbus_message_iter_get_arg_type(iter) != CDBUS_TYPE_INVALID {
            values.append(try read(from: iter))
            dbus_message_iter_next(iter)
        }
        return values
    }

    static func readString(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(iter, &pointer)
        guard let pointer else { return "" }
        return String(cString: pointer)
    }

    /// The full signature of the value at `iter` (freed here).
    static func currentSignature(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> String {
        guard let raw = dbus_message_iter_get_signature(iter) else { return "" }
        defer { dbus_free(raw) }
        return String(cString: raw)
    }

    private static func readArray(_ iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) -> DBusValue {
        let elementType = dbus_message_iter_get_element_type(iter)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(iter, &sub)
        if elementType == CDBUS_TYPE_BYTE {
            return .bytes(readFixedBytes(&sub))
        }
        let signature = currentSignature(iter)
        if elementType == CDBUS_TYPE_DICT_ENTRY {
            // "a{kv}": the key is one basic type code, the value the rest.
            let inner = signature.dropFirst(2).dropLast()
            let key = DBusSignature(trusted: String(inner.prefix(1)))
            let value = DBusSignature(trusted: String(inner.dropFirst()))
            var entries: [DictionaryEntry] = []
            while dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_DICT_ENTRY {
                var pair = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &pair)
                let k = try read(from: &pair)
                dbus_message_iter_next(&pair)
                let v = try read(from: &pair)
                entries.append(DictionaryEntry(k, v))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(key: key, value: value, entries)
        }
        let element = DBusSignature(trusted: String(signature.dropFirst()))
        return .array(element: element, try readAll(from: &sub))
    }

    /// Reads an `ay` array's bytes in one copy; `sub` is the array's content iterator.
    static func readFixedBytes(_ sub: UnsafeMutablePointer<DBusMessageIter>) -> [UInt8] {
        var pointer: UnsafeRawPointer? = nil
        var count: Int32 = 0
        withUnsafeMutablePointer(to: &pointer) { dbus_message_iter_get_fixed_array(sub, $0, &count) }
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: Int(count)))
    }
}
