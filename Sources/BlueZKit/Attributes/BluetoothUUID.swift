public import Foundation

/// A Bluetooth attribute UUID, as Core Bluetooth's `CBUUID`.
///
/// The value is always the canonical 128-bit UUID. A 16-bit or 32-bit UUID
/// assigned by the Bluetooth SIG is shorthand for a UUID built on the
/// Bluetooth base UUID `0000xxxx-0000-1000-8000-00805F9B34FB`, so `180D`,
/// `0000180D` and `0000180D-0000-1000-8000-00805F9B34FB` are the same value:
/// equal, with the same hash.
///
/// ```swift
/// let heartRate: BluetoothUUID = "180D"
/// heartRate == BluetoothUUID(string: "0000180d-0000-1000-8000-00805f9b34fb") // true
/// heartRate.uuidString   // "180D"
/// ```
///
/// Creating one from text:
/// - `init(string:)` is Core Bluetooth's `CBUUID(string:)`: it accepts what
///   Apple's accepts and returns a UUID, not an optional. Text that is not a
///   UUID is a programmer error there (Apple's raises an exception) and traps
///   here, naming the text.
/// - `init?(parsing:)` returns `nil` for text that is not a UUID, and
///   `init(validating:)` throws a ``BluetoothUUIDError`` saying why. Use one of
///   them for text that comes from outside your source: the bus, files, users.
///   BlueZKit itself parses everything it receives with them.
/// - A string literal (`let u: BluetoothUUID = "180D"`) is checked as
///   `init(string:)` checks it.
///
/// Accepted text, letters in either case, optionally after a `0x` or `0X`
/// prefix: 4 hexadecimal digits (16-bit), 8 hexadecimal digits (32-bit), or
/// 36 characters in the `8-4-4-4-12` hyphenated form (128-bit). Whitespace and
/// braces are rejected.
public struct BluetoothUUID: Hashable, Sendable {
    /// The first 8 bytes of the 128-bit value, big-endian.
    private let high: UInt64
    /// The last 8 bytes of the 128-bit value, big-endian.
    private let low: UInt64

    /// The high 8 bytes of the Bluetooth base UUID, without the 32-bit value.
    private static let baseHigh: UInt64 = 0x0000_0000_0000_1000
    /// The low 8 bytes of the Bluetooth base UUID.
    private static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    private init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    // MARK: Creating

    /// Creates the UUID for a 16-bit value assigned by the Bluetooth SIG.
    ///
    /// `BluetoothUUID(0x180D)` is the Heart Rate service,
    /// `0000180D-0000-1000-8000-00805F9B34FB`.
    public init(_ value: UInt16) {
        self.init(uuid32: UInt32(value))
    }

    /// Creates the UUID for a 32-bit value on the Bluetooth base UUID.
    ///
    /// A value up to `0xFFFF` gives the same UUID as the 16-bit initialiser.
    public init(uuid32 value: UInt32) {
        self.init(high: Self.baseHigh | (UInt64(value) << 32), low: Self.baseLow)
    }

    /// Creates a Bluetooth UUID with the same 128 bits as a Foundation `UUID`.
    ///
    /// If `uuid` lies on the Bluetooth base UUID, the result equals the
    /// corresponding 16-bit or 32-bit UUID.
    public init(_ uuid: UUID) {
        let t = uuid.uuid
        let bytes = [
            t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7,
            t.8, t.9, t.10, t.11, t.12, t.13, t.14, t.15,
        ]
        self.init(bytes128: bytes)
    }

    /// Creates a UUID from its text, as Core Bluetooth's `CBUUID(string:)`;
    /// text that is not a UUID traps.
    ///
    /// Accepts 4 or 8 hexadecimal digits or the 36-character hyphenated
    /// form, in either case, with or without a `0x` prefix:
    /// `CBUUID(string: "0x180D")`, `"180d"` and
    /// `"0000180D-0000-1000-8000-00805F9B34FB"` are the same UUID. Core
    /// Bluetooth raises an exception for other text; this initialiser stops the
    /// program with a message naming the text. For text that does not come from
    /// your source use ``init(parsing:)-(String)`` (nil) or
    /// ``init(validating:)-(String)`` (throws).
    public init(string: String) {
        do {
            try self.init(validating: string)
        } catch {
            fatalError("CBUUID(string:): \"\(string)\" is not a valid UUID string: \(error.message)")
        }
    }

    /// Creates a UUID from its text, or returns `nil` if the text is not one.
    ///
    /// Accepts exactly what ``init(string:)`` accepts. This is the initialiser for
    /// untrusted text: bus values, files, user input.
    public init?(parsing string: String) {
        guard let uuid = try? Self(validating: string) else { return nil }
        self = uuid
    }

    /// Creates a UUID from its text, throwing a ``BluetoothUUIDError`` that
    /// says why the text is not a UUID.
    ///
    /// Accepts exactly what ``init(string:)`` accepts.
    public init(validating string: String) throws(BluetoothUUIDError) {
        var chars = Array(string.utf8)
        guard !chars.isEmpty else { throw BluetoothUUIDError(.empty, input: string) }
        if chars.count > 2, chars[0] == UInt8(ascii: "0"), chars[1] | 0x20 == UInt8(ascii: "x") {
            chars.removeFirst(2)
        }
        if let bad = chars.firstIndex(where: { Self.hexValue($0) == nil && $0 != UInt8(ascii: "-") }) {
            throw BluetoothUUIDError(
                .invalidCharacter, input: string,
                message: "A Bluetooth UUID string contains only hexadecimal digits and hyphens; "
                    + "byte \(bad) is not one.")
        }
        switch chars.count {
        case 4, 8:
            guard !chars.contains(UInt8(ascii: "-")) else {
                throw BluetoothUUIDError(.misplacedHyphen, input: string)
            }
            var value: UInt32 = 0
            for c in chars { value = value << 4 | UInt32(Self.hexValue(c)!) }
            self.init(uuid32: value)
        case 36:
            let hyphens: Set<Int> = [8, 13, 18, 23]
            var nibbles: [UInt8] = []
            nibbles.reserveCapacity(32)
            for (i, c) in chars.enumerated() {
                let isHyphen = c == UInt8(ascii: "-")
                guard isHyphen == hyphens.contains(i) else {
                    throw BluetoothUUIDError(.misplacedHyphen, input: string)
                }
                if !isHyphen { nibbles.append(Self.hexValue(c)!) }
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16)
            for i in stride(from: 0, to: 32, by: 2) { bytes.append(nibbles[i] << 4 | nibbles[i + 1]) }
            self.init(bytes128: bytes)
        default:
            throw BluetoothUUIDError(.invalidLength, input: string)
        }
    }

    /// Creates a UUID from 2, 4 or 16 big-endian bytes, as Core Bluetooth's
    /// `CBUUID(data:)`; any other length traps.
    ///
    /// Two bytes are a 16-bit UUID (`[0x18, 0x0D]` is `180D`), four bytes a
    /// 32-bit UUID and sixteen bytes the full 128-bit UUID, all in network
    /// (big-endian) order. Core Bluetooth raises an exception for other
    /// lengths; this initialiser stops the program. Use ``init(parsing:)-(Data)``
    /// for bytes that come from outside your source.
    public init(data: Data) {
        do {
            try self.init(validating: data)
        } catch {
            fatalError("CBUUID(data:): \(data.count) bytes are not a UUID: \(error.message)")
        }
    }

    /// Creates a UUID from 2, 4 or 16 big-endian bytes, or returns `nil` for
    /// any other length.
    public init?(parsing data: Data) {
        guard let uuid = try? Self(validating: data) else { return nil }
        self = uuid
    }

    /// Creates a Bluetooth UUID with the same 128 bits as a Foundation `UUID`,
    /// as Core Bluetooth's `CBUUID(nsuuid:)`.
    public init(nsuuid uuid: UUID) {
        self.init(uuid)
    }

    /// Creates a UUID from 2, 4 or 16 big-endian bytes, throwing a
    /// ``BluetoothUUIDError`` with code `.invalidDataLength` for any other
    /// length.
    public init(validating data: Data) throws(BluetoothUUIDError) {
        let bytes = [UInt8](data)
        switch bytes.count {
        case 2, 4:
            self.init(uuid32: bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        case 16:
            self.init(bytes128: bytes)
        default:
            let hex = bytes.map { Self.hexDigits(UInt64($0), count: 2, uppercase: false) }.joined()
            throw BluetoothUUIDError(.invalidDataLength, input: hex)
        }
    }

    private init(bytes128 bytes: [UInt8]) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for b in bytes[0..<8] { high = high << 8 | UInt64(b) }
        for b in bytes[8..<16] { low = low << 8 | UInt64(b) }
        self.init(high: high, low: low)
    }

    // MARK: Reading

    /// The 32-bit value if this UUID lies on the Bluetooth base UUID.
    private var baseValue: UInt32? {
        guard low == Self.baseLow, high & 0xFFFF_FFFF == Self.baseHigh else { return nil }
        return UInt32(truncatingIfNeeded: high >> 32)
    }

    /// The 16-bit value if this is a 16-bit UUID on the Bluetooth base UUID,
    /// otherwise `nil`.
    ///
    /// `BluetoothUUID("0000180D-0000-1000-8000-00805F9B34FB").shortValue` is
    /// `0x180D`.
    public var shortValue: UInt16? {
        baseValue.flatMap { UInt16(exactly: $0) }
    }

    /// The UUID as text, in its shortest form, as Core Bluetooth prints it.
    ///
    /// Four upper-case hexadecimal digits for a 16-bit UUID on the Bluetooth
    /// base UUID (`"180D"`), eight for a 32-bit one (`"12345678"`), and the
    /// upper-case 36-character form otherwise
    /// (`"71DA3FD1-7E10-41C1-B16F-4430B506CDE7"`). Parsing it back gives an
    /// equal UUID.
    public var uuidString: String {
        if let value = baseValue {
            return Self.hexDigits(UInt64(value), count: value <= 0xFFFF ? 4 : 8, uppercase: true)
        }
        return longString(uppercase: true)
    }

    /// The UUID as big-endian bytes in its shortest form, as Core Bluetooth's
    /// `CBUUID.data`.
    ///
    /// 2 bytes for a 16-bit UUID on the Bluetooth base UUID, 4 bytes for a
    /// 32-bit one, 16 bytes otherwise. ``init(data:)`` reads it back.
    public var data: Data {
        if let value = baseValue {
            let bytes = [
                UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value),
            ]
            return Data(value <= 0xFFFF ? bytes[2...] : bytes[...])
        }
        return Data(bytes128)
    }

    /// The full 128-bit value as a Foundation `UUID`.
    public var uuid: UUID {
        let b = bytes128
        return UUID(
            uuid: (
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]
            ))
    }

    /// The full 128-bit form in lower case, as BlueZ writes UUIDs
    /// (`"0000180d-0000-1000-8000-00805f9b34fb"`).
    package var bluezString: String {
        longString(uppercase: false)
    }

    private var bytes128: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
    }

    private func longString(uppercase: Bool) -> String {
        let h = Self.hexDigits(high, count: 16, uppercase: uppercase)
        let l = Self.hexDigits(low, count: 16, uppercase: uppercase)
        return "\(h.prefix(8))-\(h.dropFirst(8).prefix(4))-\(h.suffix(4))-\(l.prefix(4))-\(l.suffix(12))"
    }

    // MARK: Hex helpers

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func hexDigits(_ value: UInt64, count: Int, uppercase: Bool) -> String {
        let digits = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
        let chars = (0..<count).reversed().map { digits[Int((value >> (4 * UInt64($0))) & 0xF)] }
        return String(decoding: chars, as: UTF8.self)
    }
}

extension BluetoothUUID: CustomStringConvertible {
    /// The same text as ``uuidString``.
    public var description: String { uuidString }
}

extension BluetoothUUID: ExpressibleByStringLiteral {
    /// Creates a UUID from a string literal such as `"180D"`.
    ///
    /// A literal that is not a UUID is a programmer error: this initialiser
    /// traps, naming the literal and the reason. Use ``init(parsing:)-(String)``
    /// or ``init(validating:)-(String)`` for text that is not a literal in your source.
    public init(stringLiteral value: String) {
        do {
            try self.init(validating: value)
        } catch {
            preconditionFailure("Invalid BluetoothUUID literal: \(error)")
        }
    }
}

extension BluetoothUUID: Codable {
    /// Decodes a UUID from a single string in any form ``init(parsing:)-(String)``
    /// accepts; other text is a `DecodingError.dataCorrupted`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            try self.init(validating: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the UUID as its ``uuidString``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uuidString)
    }
}

extension BluetoothUUID: CodingKeyRepresentable {
    /// The ``uuidString`` as a dictionary key, so a `[BluetoothUUID: Data]`
    /// encodes as a keyed object (`{"180D": …}`) rather than an array of
    /// pairs.
    public var codingKey: any CodingKey {
        UUIDCodingKey(stringValue: uuidString)
    }

    /// Reads a dictionary key written by ``codingKey``, or any text
    /// ``init(parsing:)-(String)`` accepts; `nil` otherwise.
    public init?<T: CodingKey>(codingKey: T) {
        self.init(parsing: codingKey.stringValue)
    }
}

/// The coding key ``BluetoothUUID/codingKey`` returns.
private struct UUIDCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }

    init(stringValue: String) {
        self.stringValue = stringValue
    }

    init?(intValue: Int) {
        nil
    }
}
