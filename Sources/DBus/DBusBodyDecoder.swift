internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// Decodes a marshalled D-Bus message body straight from its bytes, without
/// `DBusMessageIter`: one pass over the buffer with a precompiled signature.
///
/// It gives exactly the values `DBusMessage.arguments()` gives, and is several
/// times faster on big bodies (a `GetManagedObjects` reply of a thousand
/// devices). It validates everything the D-Bus specification asks of a body —
/// alignment and zero padding, array lengths (at most 64 MiB) that end on an
/// element boundary, booleans 0 or 1, strings in UTF-8 without NUL and
/// NUL-terminated, object paths and signatures well formed, nesting depth, the
/// body consumed exactly — so hostile bytes give a `DBusError`, never a crash
/// or a read past the buffer. Unix file descriptors (`h`) need the message's
/// descriptor list, which libdbus does not expose: `DBusMessage.decodedArguments()`
/// leaves such messages to `arguments()`, and the byte-level entry points reject them.
package enum DBusBodyDecoder {
    /// The arguments of `body`, marshalled with `signature` in the given byte order.
    package static func decode(
        body: UnsafeRawBufferPointer, signature: String, bigEndian: Bool
    ) throws(DBusError) -> [DBusValue] {
        var table = DBusTypeTable()
        let types = try table.parseMessageSignature(signature)
        var reader = DBusBodyReader(body, bigEndian: bigEndian, table: table)
        var values: [DBusValue] = []
        values.reserveCapacity(types.count)
        for type in types { values.append(try reader.value(type)) }
        try reader.finish()
        return values
    }

    /// What the byte-level entry points throw on a Unix file descriptor (`h`, also
    /// inside a variant): only libdbus has the message's descriptors.
    package static let fileDescriptorError = DBusError(
        .invalidArgs, "Unix file descriptors cannot be decoded from body bytes alone")

    /// Convenience over an array of bytes.
    package static func decode(body: [UInt8], signature: String, bigEndian: Bool) throws(DBusError) -> [DBusValue] {
        let result = body.withUnsafeBytes { buffer in
            Result { () throws(DBusError) in try decode(body: buffer, signature: signature, bigEndian: bigEndian) }
        }
        return try result.get()
    }

    /// An ObjectManager's `GetManagedObjects` body, `a{oa{sa{sv}}}`, straight into
    /// path → interface → property → value, the variants around each property
    /// unwrapped (later duplicates win, as in a Swift dictionary built in order).
    package static func managedObjects(
        body: UnsafeRawBufferPointer, signature: String, bigEndian: Bool
    ) throws(DBusError) -> [ObjectPath: [String: [String: DBusValue]]] {
        guard signature == "a{oa{sa{sv}}}" else {
            throw DBusError(.invalidArgs, "expected arguments 'a{oa{sa{sv}}}', got '\(signature.debugEscaped)'")
        }
        var reader = DBusBodyReader(body, bigEndian: bigEndian, table: DBusTypeTable())
        let tree = try reader.managedObjects()
        try reader.finish()
        return tree
    }
}

// MARK: - Messages

extension DBusMessage {
    /// All arguments, decoded from the marshalled body by `DBusBodyDecoder` (the
    /// same values as `arguments()`, faster for big bodies). Bodies with Unix file
    /// descriptors are decoded by `arguments()`.
    package func decodedArguments() throws(DBusError) -> [DBusValue] {
        let signature = self.signature.rawValue
        if signature.isEmpty { return [] }
        if signature.utf8.contains(UInt8(ascii: "h")) || dbus_message_contains_unix_fds(raw) != 0 {
            return try arguments()
        }
        do {
            return try withMarshalledBody { (body, bigEndian) throws(DBusError) -> [DBusValue] in
                try DBusBodyDecoder.decode(body: body, signature: signature, bigEndian: bigEndian)
            }
        } catch  where error == DBusBodyDecoder.fileDescriptorError {
            // An `h` inside a variant of a message that claims no descriptors.
            return try arguments()
        }
    }

    /// The body of an ObjectManager's `GetManagedObjects` reply (`a{oa{sa{sv}}}`)
    /// as path → interface → property → value, variants unwrapped; `invalidArgs`
    /// for any other signature, and `DBusBodyDecoder.fileDescriptorError` for a
    /// Unix file descriptor in a property (use `arguments()` for those).
    package func managedObjects() throws(DBusError) -> [ObjectPath: [String: [String: DBusValue]]] {
        let signature = self.signature.rawValue
        return try withMarshalledBody { (body, bigEndian) throws(DBusError) in
            try DBusBodyDecoder.managedObjects(body: body, signature: signature, bigEndian: bigEndian)
        }
    }

    /// The whole message in wire form (header and body), as libdbus marshals it.
    package func marshalled() throws(DBusError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &buffer, &length) != 0, let buffer else {
            throw DBusError(.noMemory, "cannot marshal a message")
        }
        defer { dbus_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
    }

    /// A message from its wire form (validated by libdbus); `invalidArgs` when libdbus rejects it.
    package static func demarshal(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let raw = bytes.withUnsafeBytes { buffer in
            dbus_message_demarshal(buffer.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(buffer.count), &error)
        }
        guard let raw else {
            let text = error.message.map { String(cString: $0) } ?? "not a valid message"
            dbus_error_free(&error)
            throw DBusError(.invalidArgs, text)
        }
        return DBusMessage(owning: raw)
    }

    /// Sets the serial of a message that has none yet (for a reply built without a
    /// bus, as the benchmarks and tests do; the connection sets it when sending).
    /// Call it before the message is marshalled: libdbus aborts on a locked message.
    /// Ignored when the message already has a serial (sent or received).
    package func setSerial(_ serial: UInt32) {
        guard self.serial == 0, serial != 0 else { return }
        dbus_message_set_serial(raw, serial)
    }

    /// Calls `body` with the marshalled body bytes and their byte order.
    func withMarshalledBody<R>(
        _ body: (UnsafeRawBufferPointer, Bool) throws(DBusError) -> R
    ) throws(DBusError) -> R {
        var buffer: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &buffer, &length) != 0, let buffer else {
            throw DBusError(.noMemory, "cannot marshal a message")
        }
        defer { dbus_free(buffer) }
        let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(length))
        let (offset, bodyLength, bigEndian) = try Self.bodyRange(bytes)
        return try body(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + bodyLength]), bigEndian)
    }

    /// Where the body of a marshalled message starts, its length and its byte order.
    static func bodyRange(_ bytes: UnsafeRawBufferPointer) throws(DBusError) -> (Int, Int, Bool) {
        guard bytes.count >= 16 else { throw DBusError(.invalidArgs, "message shorter than its fixed header") }
        let bigEndian: Bool
        switch bytes[0] {
        case UInt8(ascii: "l"): bigEndian = false
        case UInt8(ascii: "B"): bigEndian = true
        default: throw DBusError(.invalidArgs, "unknown byte order \(bytes[0])")
        }
        func u32(_ at: Int) -> Int {
            let v = bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            return Int(bigEndian ? UInt32(bigEndian: v) : UInt32(littleEndian: v))
        }
        let bodyLength = u32(4)
        let fieldsLength = u32(12)
        let offset = (16 + fieldsLength + 7) & ~7
        guard offset <= bytes.count, bodyLength <= bytes.count - offset else {
            throw DBusError(.invalidArgs, "message body outside the message")
        }
        return (offset, bodyLength, bigEndian)
    }
}

// MARK: - Signatures

/// Complete types parsed from signatures, as nodes of one table (plain integers,
/// so that reading a value touches no reference counts).
struct DBusTypeTable {
    struct Node {
        /// The type code; `A` for `ay`, `D` for `a{…}`, `(` for a struct.
        var code: UInt8
        var alignment: UInt8
        /// Array: element; dictionary: key; struct: first index in `fields`.
        var first: Int32 = 0
        /// Dictionary: value; struct: field count.
        var second: Int32 = 0
    }

    var nodes: [Node] = []
    var fields: [Int32] = []
    /// Array: element signature; dictionary: key signature (by node).
    var signatures1: [DBusSignature] = []
    /// Dictionary: value signature (by node).
    var signatures2: [DBusSignature] = []
    /// Variant signatures seen before, by up to 7 bytes packed with their length.
    var shortCache: [UInt64: Int32] = [:]
    var longCache: [String: Int32] = [:]

    static let maximumSignatureLength = 255
    static let maximumArrayDepth = 32
    static let maximumStructDepth = 32
    static let basicCodes: [UInt8] = Array("ybnqiuxtdsogh".utf8)
    /// Node index of each single-character type (`v` included), or -1.
    static let singleIndex: [Int32] = {
        var index = [Int32](repeating: -1, count: 256)
        for (i, code) in (basicCodes + [UInt8(ascii: "v")]).enumerated() { index[Int(code)] = Int32(i) }
        return index
    }()

    init() {
        nodes.reserveCapacity(32)
        for code in Self.basicCodes + [UInt8(ascii: "v")] {
            add(Node(code: code, alignment: Self.alignment(of: code)))
        }
    }

    static func alignment(of code: UInt8) -> UInt8 {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): return 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): return 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "D"): return 8
        default: return 4
        }
    }

    @discardableResult
    mutating func add(_ node: Node, _ signature1: DBusSignature = .empty, _ signature2: DBusSignature = .empty) -> Int32
    {
        nodes.append(node)
        signatures1.append(signature1)
        signatures2.append(signature2)
        return Int32(nodes.count - 1)
    }

    /// The complete types of a message signature.
    mutating func parseMessageSignature(_ signature: String) throws(DBusError) -> [Int32] {
        var copy = signature
        let result = copy.withUTF8 { bytes in
            Result { () throws(DBusError) -> [Int32] in
                guard bytes.count <= Self.maximumSignatureLength else {
                    throw DBusError(.invalidSignature, "signature longer than 255 characters")
                }
                var types: [Int32] = []
                var i = 0
                while i < bytes.count {
                    types.append(try parse(bytes, &i, arrays: 0, structs: 0, dicts: 0))
                }
                return types
            }
        }
        return try result.get()
    }

    /// The one complete type of a variant's signature (cached).
    mutating func variantType(_ bytes: UnsafeRawBufferPointer) throws(DBusError) -> Int32 {
        if bytes.count == 1 {
            let index = Self.singleIndex[Int(bytes[0])]
            if index >= 0 { return index }
        }
        if bytes.count <= 7 {
            var key = UInt64(bytes.count) << 56
            for (i, byte) in bytes.enumerated() { key |= UInt64(byte) << (8 * UInt64(i)) }
            if let index = shortCache[key] { return index }
            let index = try parseSingle(bytes)
            shortCache[key] = index
            return index
        }
        let string = String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        if let index = longCache[string] { return index }
        let index = try parseSingle(bytes)
        longCache[string] = index
        return index
    }

    private mutating func parseSingle(_ raw: UnsafeRawBufferPointer) throws(DBusError) -> Int32 {
        let bytes = raw.assumingMemoryBound(to: UInt8.self)
        var i = 0
        guard !bytes.isEmpty else { throw DBusError(.invalidSignature, "empty variant signature") }
        let type = try parse(bytes, &i, arrays: 0, structs: 0, dicts: 0)
        guard i == bytes.count else {
            throw DBusError(.invalidSignature, "variant signature is not a single complete type")
        }
        return type
    }

    /// Parses one complete type at `i` (advanced past it). The limits are libdbus's:
    /// at most 32 `a` in a row (`arrays`, reset by any other code), 32 nested structs
    /// and 32 nested dict entries.
    private mutating func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, _ i: inout Int, arrays: Int, structs: Int, dicts: Int
    ) throws(DBusError) -> Int32 {
        guard i < bytes.count else { throw DBusError(.invalidSignature, "signature ends inside a type") }
        let code = bytes[i]
        let single = Self.singleIndex[Int(code)]
        if single >= 0 {
            i += 1
            return single
        }
        switch code {
        case UInt8(ascii: "a"):
            guard arrays < Self.maximumArrayDepth else {
                throw DBusError(.invalidSignature, "signature has more than 32 arrays in a row")
            }
            i += 1
            guard i < bytes.count else { throw DBusError(.invalidSignature, "array without element type") }
            if bytes[i] == UInt8(ascii: "y") {
                i += 1
                return add(Node(code: UInt8(ascii: "A"), alignment: 4))
            }
            if bytes[i] == UInt8(ascii: "{") {
                guard dicts < Self.maximumStructDepth else {
                    throw DBusError(.invalidSignature, "signature nests more than 32 dict entries")
                }
                i += 1
                let keyStart = i
                let key = try parse(bytes, &i, arrays: 0, structs: structs, dicts: dicts + 1)
                guard Self.basicCodes.contains(nodes[Int(key)].code) else {
                    throw DBusError(.invalidSignature, "dictionary key is not a basic type")
                }
                let valueStart = i
                let value = try parse(bytes, &i, arrays: 0, structs: structs, dicts: dicts + 1)
                guard i < bytes.count, bytes[i] == UInt8(ascii: "}") else {
                    throw DBusError(.invalidSignature, "dictionary entry without exactly two types")
                }
                let keySignature = Self.signature(bytes, keyStart, valueStart)
                let valueSignature = Self.signature(bytes, valueStart, i)
                i += 1
                return add(
                    Node(code: UInt8(ascii: "D"), alignment: 4, first: key, second: value), keySignature,
                    valueSignature)
            }
            let start = i
            let element = try parse(bytes, &i, arrays: arrays + 1, structs: structs, dicts: dicts)
            return add(
                Node(code: UInt8(ascii: "a"), alignment: 4, first: element), Self.signature(bytes, start, i))
        case UInt8(ascii: "("):
            guard structs < Self.maximumStructDepth else {
                throw DBusError(.invalidSignature, "signature nests more than 32 structs")
            }
            i += 1
            var members: [Int32] = []
            while i < bytes.count, bytes[i] != UInt8(ascii: ")") {
                members.append(try parse(bytes, &i, arrays: 0, structs: structs + 1, dicts: dicts))
            }
            guard i < bytes.count else { throw DBusError(.invalidSignature, "unterminated struct") }
            guard !members.isEmpty else { throw DBusError(.invalidSignature, "empty struct") }
            i += 1
            let first = Int32(fields.count)
            fields.append(contentsOf: members)
            return add(Node(code: UInt8(ascii: "("), alignment: 8, first: first, second: Int32(members.count)))
        default:
            throw DBusError(.invalidSignature, "invalid type code \(code) in a signature")
        }
    }

    private static func signature(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> DBusSignature {
        DBusSignature(trusted: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
    }
}

// MARK: - Reading

/// The general decoder's cursor over one body (see `DBusBodyCursor` for the primitives):
/// the nesting depth and the type table of the signature it decodes.
struct DBusBodyReader: DBusBodyCursor {
    let base: UnsafeRawPointer
    let count: Int
    let bigEndian: Bool
    var position = 0
    var depth = 0
    var table: DBusTypeTable

    /// Nesting of containers (arrays, structs, dict entries, variants) at most.
    static let maximumDepth = 128
    static let maximumArrayLength = 64 << 20

    init(_ body: UnsafeRawBufferPointer, bigEndian: Bool, table: DBusTypeTable) {
        self.base = Self.baseAddress(of: body)
        self.count = body.count
        self.bigEndian = bigEndian
        self.table = table
    }

    func finish() throws(DBusError) {
        guard position == count else { throw Self.malformed("\(count - position) bytes after the last argument") }
    }

    /// The bytes of a string (`s`, `o`: 32-bit length; `g`: 8-bit), checked for
    /// the terminating NUL and no NUL inside; the position moves past the NUL.
    @inline(__always)
    mutating func stringBytes(shortLength: Bool) throws(DBusError) -> UnsafeRawBufferPointer {
        let bytes = try terminatedBytes(shortLength: shortLength)
        guard Self.isASCIIWithoutNUL(bytes) || Self.isUTF8WithoutNUL(bytes) else {
            throw Self.malformed("string is not UTF-8 or contains a NUL character")
        }
        return bytes
    }

    /// True when every byte is in 1...127 (eight at a time).
    @inline(__always)
    static func isASCIIWithoutNUL(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = bytes.count
        guard let p = bytes.baseAddress else { return true }
        var i = 0
        let high: UInt64 = 0x8080_8080_8080_8080
        let ones: UInt64 = 0x0101_0101_0101_0101
        while i + 8 <= n {
            let word = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A high bit set, or a zero byte (the classic (x - 0x01…) & ~x & 0x80… test).
            if word & high != 0 || (word &- ones) & ~word & high != 0 { return false }
            i += 8
        }
        while i < n {
            let byte = p.load(fromByteOffset: i, as: UInt8.self)
            if byte == 0 || byte & 0x80 != 0 { return false }
            i += 1
        }
        return true
    }

    /// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF) without NUL.
    static func isUTF8WithoutNUL(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let n = bytes.count
        while i < n {
            let b0 = bytes[i]
            if b0 < 0x80 {
                if b0 == 0 { return false }
                i += 1
                continue
            }
            func continuation(_ k: Int) -> Bool { i + k < n && bytes[i + k] & 0xC0 == 0x80 }
            switch b0 {
            case 0xC2...0xDF:
                guard continuation(1) else { return false }
                i += 2
            case 0xE0...0xEF:
                guard continuation(1), continuation(2) else { return false }
                let b1 = bytes[i + 1]
                if b0 == 0xE0 && b1 < 0xA0 { return false }  // overlong
                if b0 == 0xED && b1 >= 0xA0 { return false }  // surrogates
                i += 3
            case 0xF0...0xF4:
                guard continuation(1), continuation(2), continuation(3) else { return false }
                let b1 = bytes[i + 1]
                if b0 == 0xF0 && b1 < 0x90 { return false }  // overlong
                if b0 == 0xF4 && b1 >= 0x90 { return false }  // past U+10FFFF
                i += 4
            default:
                return false
            }
        }
        return true
    }

    @inline(__always)
    mutating func string() throws(DBusError) -> String {
        let bytes = try stringBytes(shortLength: false)
        return String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    mutating func objectPath() throws(DBusError) -> ObjectPath {
        let bytes = try stringBytes(shortLength: false)
        guard Self.isValidPath(bytes) else { throw Self.malformed("invalid object path") }
        return ObjectPath(trusted: String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self))
    }

    /// `/`, or `/` elements of `[A-Za-z0-9_]+` separated by single slashes, no trailing slash.
    static func isValidPath(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first, first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        var previousSlash = true
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
            } else {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
                    previousSlash = false
                default: return false
                }
            }
        }
        return !previousSlash
    }

    mutating func signatureValue() throws(DBusError) -> DBusSignature {
        let bytes = try stringBytes(shortLength: true)
        // Validate: any number of complete types.
        var scratch = DBusTypeTable()
        let string = String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        _ = try scratch.parseMessageSignature(string)
        return DBusSignature(trusted: string)
    }

    mutating func enter() throws(DBusError) {
        depth += 1
        guard depth <= Self.maximumDepth else {
            throw Self.malformed("containers nested deeper than \(Self.maximumDepth)")
        }
    }

    /// An array's length, then the padding to its first element; returns the end position.
    @inline(__always)
    mutating func arrayStart(elementAlignment: Int) throws(DBusError) -> Int {
        let length = Int(try uint32())
        guard length <= Self.maximumArrayLength else { throw Self.malformed("array longer than 64 MiB") }
        try align(elementAlignment)
        guard length <= count - position else { throw Self.malformed("array past the end") }
        return position + length
    }

    /// The value of type node `type` at the position.
    mutating func value(_ type: Int32) throws(DBusError) -> DBusValue {
        let node = table.nodes[Int(type)]
        switch node.code {
        case UInt8(ascii: "y"): return .byte(try byte())
        case UInt8(ascii: "b"):
            switch try uint32() {
            case 0: return .bool(false)
            case 1: return .bool(true)
            default: throw Self.malformed("boolean neither 0 nor 1")
            }
        case UInt8(ascii: "n"): return .int16(try fixed(Int16.self))
        case UInt8(ascii: "q"): return .uint16(try fixed(UInt16.self))
        case UInt8(ascii: "i"): return .int32(try fixed(Int32.self))
        case UInt8(ascii: "u"): return .uint32(try uint32())
        case UInt8(ascii: "x"): return .int64(try fixed(Int64.self))
        case UInt8(ascii: "t"): return .uint64(try fixed(UInt64.self))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: try fixed(UInt64.self)))
        case UInt8(ascii: "s"): return .string(try string())
        case UInt8(ascii: "o"): return .objectPath(try objectPath())
        case UInt8(ascii: "g"): return .signature(try signatureValue())
        case UInt8(ascii: "h"):
            throw DBusBodyDecoder.fileDescriptorError
        case UInt8(ascii: "v"): return .variant(try variant())
        case UInt8(ascii: "A"):
            let end = try arrayStart(elementAlignment: 1)
            let bytes = Array(UnsafeRawBufferPointer(start: base + position, count: end - position))
            position = end
            return .bytes(bytes)
        case UInt8(ascii: "a"):
            let element = node.first
            let end = try arrayStart(elementAlignment: Int(table.nodes[Int(element)].alignment))
            try enter()
            var elements: [DBusValue] = []
            while position < end { elements.append(try value(element)) }
            guard position == end else { throw Self.malformed("array element crosses the array's end") }
            depth -= 1
            return .array(element: table.signatures1[Int(type)], elements)
        case UInt8(ascii: "D"):
            let end = try arrayStart(elementAlignment: 8)
            try enter()
            try enter()
            var entries: [DBusValue.DictionaryEntry] = []
            while position < end {
                try align(8)
                let key = try value(node.first)
                let value = try value(node.second)
                entries.append(DBusValue.DictionaryEntry(key, value))
            }
            guard position == end else { throw Self.malformed("dictionary entry crosses the array's end") }
            depth -= 2
            return .dictionary(key: table.signatures1[Int(type)], value: table.signatures2[Int(type)], entries)
        case UInt8(ascii: "("):
            try align(8)
            try enter()
            var members: [DBusValue] = []
            members.reserveCapacity(Int(node.second))
            for i in Int(node.first)..<Int(node.first + node.second) {
                members.append(try value(table.fields[i]))
            }
            depth -= 1
            return .structure(members)
        default:
            throw DBusError(.invalidArgs, "unknown type code \(node.code)")
        }
    }

    /// A variant's inner value (its signature, then the value).
    mutating func variant() throws(DBusError) -> DBusValue {
        let signature = try stringBytes(shortLength: true)
        let inner = try table.variantType(signature)
        try enter()
        let value = try value(inner)
        depth -= 1
        return value
    }

    // MARK: GetManagedObjects

    /// `a{oa{sa{sv}}}` into nested Swift dictionaries (variants unwrapped). Each
    /// dictionary's entries are gathered first, so that it is made at its size at once.
    mutating func managedObjects() throws(DBusError) -> [ObjectPath: [String: [String: DBusValue]]] {
        let end = try arrayStart(elementAlignment: 8)
        var objects: [(ObjectPath, [String: [String: DBusValue]])] = []
        var interfaceScratch: [(String, [String: DBusValue])] = []
        var propertyScratch: [(String, DBusValue)] = []
        while position < end {
            try align(8)
            let path = try objectPath()
            objects.append((path, try interfaces(&interfaceScratch, &propertyScratch)))
        }
        guard position == end else { throw Self.malformed("dictionary entry crosses the array's end") }
        var tree = [ObjectPath: [String: [String: DBusValue]]](minimumCapacity: objects.count)
        for (path, interfaces) in objects { tree[path] = interfaces }
        return tree
    }

    /// `a{sa{sv}}`.
    mutating func interfaces(
        _ scratch: inout [(String, [String: DBusValue])], _ propertyScratch: inout [(String, DBusValue)]
    ) throws(DBusError) -> [String: [String: DBusValue]] {
        let end = try arrayStart(elementAlignment: 8)
        scratch.removeAll(keepingCapacity: true)
        while position < end {
            try align(8)
            let name = try string()
            scratch.append((name, try properties(&propertyScratch)))
        }
        guard position == end else { throw Self.malformed("dictionary entry crosses the array's end") }
        var interfaces = [String: [String: DBusValue]](minimumCapacity: scratch.count)
        for (name, properties) in scratch { interfaces[name] = properties }
        return interfaces
    }

    /// `a{sv}`, variants unwrapped.
    mutating func properties(_ scratch: inout [(String, DBusValue)]) throws(DBusError) -> [String: DBusValue] {
        let end = try arrayStart(elementAlignment: 8)
        scratch.removeAll(keepingCapacity: true)
        while position < end {
            try align(8)
            let name = try string()
            var value = try variant()
            while case .variant(let inner) = value { value = inner }
            scratch.append((name, value))
        }
        guard position == end else { throw Self.malformed("dictionary entry crosses the array's end") }
        var properties = [String: DBusValue](minimumCapacity: scratch.count)
        for (name, value) in scratch { properties[name] = value }
        return properties
    }
}
