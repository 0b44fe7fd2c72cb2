/// How a central writes a characteristic's value, as Core Bluetooth's
/// `CBCharacteristicWriteType`.
///
/// The raw values are Core Bluetooth's. The corresponding BlueZ write types
/// are `request` and `command`.
public enum CharacteristicWriteType: Int, Hashable, Sendable, CaseIterable, Codable {
    /// Write and wait for the peripheral to confirm (0); the result arrives in
    /// `peripheral(_:didWriteValueFor:error:)`.
    case withResponse = 0
    /// Write without a confirmation (1); nothing reports success. Writes wait their turn
    /// rather than being dropped: see ``Peripheral/canSendWriteWithoutResponse``.
    case withoutResponse = 1
}
