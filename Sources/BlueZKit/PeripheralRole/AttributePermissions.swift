/// Who may read and write the value of a characteristic or descriptor you
/// publish, as Core Bluetooth's `CBAttributePermissions`.
///
/// The raw values are Core Bluetooth's. Permissions apply to the attribute's
/// value; the characteristic's ``CharacteristicProperties`` say which
/// operations are offered at all. A readable characteristic needs both the
/// ``CharacteristicProperties/read`` property and ``readable`` (or
/// ``readEncryptionRequired``).
///
/// When both ``readable`` and ``readEncryptionRequired`` are set, the
/// stricter one wins: reads require an encrypted link. The same holds for
/// writing.
public struct AttributePermissions: OptionSet, Hashable, Sendable, Codable {
    /// The bit mask, with Core Bluetooth's values.
    public let rawValue: UInt

    /// Creates a set of permissions from Core Bluetooth's bit mask; unknown
    /// bits are kept.
    public init(rawValue: UInt) {
        self.rawValue = rawValue
    }

    /// Any connected central can read the value (0x01).
    public static let readable = AttributePermissions(rawValue: 0x01)
    /// Any connected central can write the value (0x02).
    public static let writeable = AttributePermissions(rawValue: 0x02)
    /// Only trusted centrals, over an encrypted link, can read the value
    /// (0x04).
    ///
    /// A central that is not paired yet is asked to pair first; on Linux
    /// BlueZ answers its read with "insufficient encryption" until it has.
    public static let readEncryptionRequired = AttributePermissions(rawValue: 0x04)
    /// Only trusted centrals, over an encrypted link, can write the value
    /// (0x08).
    public static let writeEncryptionRequired = AttributePermissions(rawValue: 0x08)
}

extension AttributePermissions {
    /// Linux: the names of the permissions in the set, for logs, such as
    /// `["readable", "writeEncryptionRequired"]`; unknown bits come last as a hexadecimal
    /// remainder. Not a `description`, as Core Bluetooth's `CBAttributePermissions` has none.
    public var names: [String] {
        let names: [(AttributePermissions, String)] = [
            (.readable, "readable"), (.writeable, "writeable"),
            (.readEncryptionRequired, "readEncryptionRequired"),
            (.writeEncryptionRequired, "writeEncryptionRequired"),
        ]
        var parts = names.filter { contains($0.0) }.map(\.1)
        let known = names.reduce(UInt(0)) { $0 | $1.0.rawValue }
        if rawValue & ~known != 0 {
            parts.append("0x" + String(rawValue & ~known, radix: 16))
        }
        return parts
    }
}
