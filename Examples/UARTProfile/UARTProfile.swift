public import BlueZKit

/// The Nordic UART Service (NUS) as the UART bridge uses it: a byte pipe in each direction over
/// GATT, and the PSM of an L2CAP channel for bulk data.
public enum UARTProfile {
    /// The Nordic UART Service.
    public static let service = BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
    /// RX: the central writes to it (write, write without response); data flows to the peripheral.
    public static let rx = BluetoothUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
    /// TX: the peripheral notifies it; data flows to the central.
    public static let tx = BluetoothUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")
    /// Apple's L2CAP PSM characteristic: where the peripheral serves its channel's PSM.
    public static let psm = BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString)

    /// The name the peripheral advertises unless told otherwise.
    public static let defaultName = "BlueZKit UART"

    /// The longest value a notification or write carries on any link (an attribute's maximum).
    public static let maximumValueLength = 512

    /// The longest write the central makes: 510 bytes. A peripheral on bluetoothd 5.66 drops
    /// write commands of 512 bytes without a word (seen in the emulated environment: every
    /// full-size write vanished, 510-byte ones arrive), though ATT allows 512 and BlueZ's MTU
    /// of 517 makes room for them; its GATT server seems to count the attribute handle into
    /// the value's length (`write_cb` → `check_length` in `src/shared/gatt-server.c`).
    public static let maximumWriteLength = 510

    /// The PSM characteristic's value: the PSM as a little-endian `UInt16`, as Apple documents it.
    public static func encode(psm: L2CAPPSM) -> Data { Data([UInt8(psm & 0xFF), UInt8(psm >> 8)]) }

    /// The PSM in a PSM characteristic's value; nil unless it is exactly two bytes.
    public static func decodePSM(_ value: Data) -> L2CAPPSM? {
        guard value.count == 2 else { return nil }
        return L2CAPPSM(value[value.startIndex]) | L2CAPPSM(value[value.startIndex + 1]) << 8
    }
}
