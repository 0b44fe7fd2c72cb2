/// Writes values in the D-Bus wire format, in the machine's byte order, into one growing buffer
/// that starts at the beginning of a message (alignment is counted from there).
///
/// Only the few types a hand-built message needs; nothing is validated here: the caller hands
/// the bytes to libdbus (`dbus_message_demarshal`), which checks the whole message.
struct DBusWireWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// The byte that marks the message's byte order: `l` (little endian) or `B`.
    static var byteOrderMark: UInt8 {
        #if _endian(little)
            UInt8(ascii: "l")
        #else
            UInt8(ascii: "B")
        #endif
    }

    var count: Int { bytes.count }

    /// Zero bytes up to the next multiple of `alignment` (1, 4 or 8).
    mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// A 32-bit unsigned integer, aligned to 4.
    mutating func uint32(_ value: UInt32) {
        pad(to: 4)
        withUnsafeBytes(of: value) { bytes.append(contentsOf: $0) }
    }

    /// Overwrites the 32-bit unsigned integer at `offset` (a length known only once its content
    /// is written).
    mutating func setUInt32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value) { raw in
            for index in 0..<4 { bytes[offset + index] = raw[index] }
        }
    }

    /// A string or object path: its length, its UTF-8 bytes and a NUL.
    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            uint32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
        bytes.append(0)
    }

    /// A signature: a length byte, the characters and a NUL.
    mutating func signature(_ text: StaticString) {
        bytes.append(UInt8(text.utf8CodeUnitCount))
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(0)
    }

    /// Raw bytes, as the elements of an `ay` (after its length).
    mutating func append(_ raw: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: raw) }
}
