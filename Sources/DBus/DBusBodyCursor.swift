/// A position in a marshalled message body, and the wire format's primitives read from there:
/// zero padding to an alignment, fixed-width integers in the body's byte order, and
/// NUL-terminated strings, every one checked against the body's end.
///
/// Positions count from the body's start, which is 8-aligned in every message, so alignment
/// is that of the position. A failed read throws ``DBusError`` (`.invalidArgs`, "malformed
/// message body: …") and never reads past `count`; after a throw the position is unspecified.
/// `DBusBodyReader` (the general decoder) and `ValueChangeReader` (the one shape of a value
/// notification) both read through these, each carrying only the state it needs.
protocol DBusBodyCursor {
    /// The body's first byte; any non-null pointer when the body is empty (nothing is read).
    var base: UnsafeRawPointer { get }
    /// The body's length in bytes.
    var count: Int { get }
    /// Whether the message was marshalled big-endian (`B` in its header).
    var bigEndian: Bool { get }
    /// The next byte to read.
    var position: Int { get set }
}

extension DBusBodyCursor {
    static func malformed(_ what: String) -> DBusError {
        DBusError(.invalidArgs, "malformed message body: \(what)")
    }

    /// A base address for `body`: its own, or any non-null pointer when it has none (empty).
    static func baseAddress(of body: UnsafeRawBufferPointer) -> UnsafeRawPointer {
        body.baseAddress ?? UnsafeRawPointer(bitPattern: 8)!
    }

    /// Skips the padding to `alignment` (a power of two); it must be zero bytes within the body.
    @inline(__always)
    mutating func align(_ alignment: Int) throws(DBusError) {
        let aligned = (position + alignment - 1) & ~(alignment - 1)
        guard aligned <= count else { throw Self.malformed("padding past the end") }
        while position < aligned {
            guard base.load(fromByteOffset: position, as: UInt8.self) == 0 else {
                throw Self.malformed("non-zero padding")
            }
            position += 1
        }
    }

    /// Throws unless `size` more bytes are left.
    @inline(__always)
    func need(_ size: Int) throws(DBusError) {
        guard size <= count - position else { throw Self.malformed("value past the end") }
    }

    @inline(__always)
    mutating func byte() throws(DBusError) -> UInt8 {
        try need(1)
        defer { position += 1 }
        return base.load(fromByteOffset: position, as: UInt8.self)
    }

    /// An integer aligned to its size, in the body's byte order.
    @inline(__always)
    mutating func fixed<T: FixedWidthInteger>(_: T.Type) throws(DBusError) -> T {
        try align(MemoryLayout<T>.size)
        try need(MemoryLayout<T>.size)
        let raw = base.loadUnaligned(fromByteOffset: position, as: T.self)
        position += MemoryLayout<T>.size
        return bigEndian ? T(bigEndian: raw) : T(littleEndian: raw)
    }

    @inline(__always)
    mutating func uint32() throws(DBusError) -> UInt32 { try fixed(UInt32.self) }

    /// The bytes of a string (`s`, `o`: 32-bit length; `g`: 8-bit) without its terminating
    /// NUL, which must be there; the position moves past it. The bytes are not checked for
    /// UTF-8 or inner NULs: `DBusBodyReader.stringBytes(shortLength:)` does that.
    @inline(__always)
    mutating func terminatedBytes(shortLength: Bool) throws(DBusError) -> UnsafeRawBufferPointer {
        let length = shortLength ? Int(try byte()) : Int(try uint32())
        guard length < count - position else { throw Self.malformed("string past the end") }
        let start = base + position
        guard start.load(fromByteOffset: length, as: UInt8.self) == 0 else {
            throw Self.malformed("string without its terminating NUL")
        }
        position += length + 1
        return UnsafeRawBufferPointer(start: start, count: length)
    }
}
