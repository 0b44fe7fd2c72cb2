import BlueZ
import Foundation

/// The BlueZ device behind a `Peripheral`, kept opaque to this layer.
typealias DeviceHandle = BlueZCentralClient.DeviceID

/// Derives a peripheral's stable identifier from the adapter's and the device's addresses.
enum PeripheralIdentity {
    /// A name-based UUID (version 8 layout) from a 128-bit FNV-1a hash of
    /// "adapter/device", addresses upper-cased: stable across runs and machines.
    static func identifier(adapterAddress: String, deviceAddress: String) -> UUID {
        let text = adapterAddress.uppercased() + "/" + deviceAddress.uppercased()
        // FNV-1a, 128-bit: offset basis and prime from the FNV specification.
        var hash: (UInt64, UInt64) = (0x6C62_272E_07BB_0142, 0x62B8_2175_6295_C58D)
        let primeLow: UInt64 = 0x0000_0000_0000_013B
        let primeHighShift: UInt64 = 24  // the prime is 2^88 + 0x13B
        for byte in text.utf8 {
            hash.1 ^= UInt64(byte)
            // (high, low) * (2^88 + 0x13B) mod 2^128
            let lowProduct = hash.1.multipliedFullWidth(by: primeLow)
            var high = hash.0 &* primeLow &+ lowProduct.high
            high = high &+ (hash.1 << primeHighShift)
            hash = (high, lowProduct.low)
        }
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
