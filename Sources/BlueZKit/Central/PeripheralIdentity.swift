import BlueZ
import Foundation

/// The BlueZ device behind a `Peripheral`, kept opaque to this layer.
typealias DeviceID = BlueZClient.DeviceID

/// Derives a peripheral's stable identifier from the adapter's and the device's addresses.
enum PeripheralIdentity {
    /// A name-based UUID (version 8 layout) from a 128-bit FNV-1a hash of
    /// "adapter/device", addresses upper-cased: stable across runs and machines.
    static func identifier(adapterAddress: String, deviceAddress: String) -> UUID {
        let text = adapterAddress.uppercased() + "/" + deviceAddress.uppercased()
        let hash = FNV1a128.hash(text.utf8)
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: hash.0 >> (56 - 8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: hash.1 >> (56 - 8 * UInt64(i)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
