/// The properties of a characteristic: how its value can be used and how its
/// descriptors can be accessed, as Core Bluetooth's
/// `CBCharacteristicProperties`.
///
/// The raw values are Core Bluetooth's. The low eight bits are the
/// characteristic-properties byte of the Bluetooth Core Specification
/// (Vol 3, Part G, 3.3.1.1); the two encryption flags above them exist only
/// for characteristics you publish with a peripheral manager.
///
/// For a remote characteristic, the properties come from the peripheral's
/// declaration (BlueZ's `GattCharacteristic1.Flags`). For a characteristic
/// you publish, Core Bluetooth does not allow ``broadcast`` or
/// ``extendedProperties``.
public struct CharacteristicProperties: OptionSet, Hashable, Sendable, Codable {
    /// The bit mask, with Core Bluetooth's values.
    public let rawValue: UInt

    /// Creates a set of properties from Core Bluetooth's bit mask; unknown
    /// bits are kept.
    public init(rawValue: UInt) {
        self.rawValue = rawValue
    }

    /// The value can be broadcast using the server characteristic
    /// configuration descriptor (0x01).
    public static let broadcast = CharacteristicProperties(rawValue: 0x01)
    /// The value can be read (0x02).
    public static let read = CharacteristicProperties(rawValue: 0x02)
    /// The value can be written without a response from the peripheral (0x04).
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    /// The value can be written, and the peripheral confirms each write (0x08).
    public static let write = CharacteristicProperties(rawValue: 0x08)
    /// The peripheral can notify subscribers of changes without expecting a
    /// confirmation (0x10).
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    /// The peripheral can indicate changes to subscribers, each confirmed by
    /// the subscriber (0x20).
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
    /// The value can be written with signed writes (0x40).
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
    /// Further properties are in the characteristic extended properties
    /// descriptor (0x80).
    public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)
    /// Only trusted (paired, encrypted) centrals can enable notifications of
    /// the value (0x100).
    ///
    /// Valid for characteristics you publish; it implies ``notify``.
    public static let notifyEncryptionRequired = CharacteristicProperties(rawValue: 0x100)
    /// Only trusted (paired, encrypted) centrals can enable indications of
    /// the value (0x200).
    ///
    /// Valid for characteristics you publish; it implies ``indicate``.
    public static let indicateEncryptionRequired = CharacteristicProperties(rawValue: 0x200)
}

extension CharacteristicProperties {
    /// Linux: the names of the properties in the set, for logs, such as `["read", "notify"]`;
    /// unknown bits come last as a hexadecimal remainder ("0x400").
    ///
    /// Not a `description`: Core Bluetooth's `CBCharacteristicProperties` has none, and apps
    /// give it their own (`extension CBCharacteristicProperties: CustomStringConvertible`), which
    /// must be the one their logs print.
    public var names: [String] {
        let names: [(CharacteristicProperties, String)] = [
            (.broadcast, "broadcast"), (.read, "read"),
            (.writeWithoutResponse, "writeWithoutResponse"), (.write, "write"),
            (.notify, "notify"), (.indicate, "indicate"),
            (.authenticatedSignedWrites, "authenticatedSignedWrites"),
            (.extendedProperties, "extendedProperties"),
            (.notifyEncryptionRequired, "notifyEncryptionRequired"),
            (.indicateEncryptionRequired, "indicateEncryptionRequired"),
        ]
        var parts = names.filter { contains($0.0) }.map(\.1)
        let known = names.reduce(UInt(0)) { $0 | $1.0.rawValue }
        if rawValue & ~known != 0 {
            parts.append("0x" + String(rawValue & ~known, radix: 16))
        }
        return parts
    }
}
