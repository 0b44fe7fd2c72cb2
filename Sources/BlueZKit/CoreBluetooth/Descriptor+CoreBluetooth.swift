import Foundation

extension Descriptor {
    /// Decodes a descriptor's bytes the way Core Bluetooth types `CBDescriptor.value`: the 16-bit
    /// little-endian value of `2900`, `2902` and `2903` as an `NSNumber`, the UTF-8 text of
    /// `2901` as a `String` (invalid sequences replaced, so bytes from the bus never trap), and
    /// the bytes themselves for every other type.
    static func coreBluetoothValue(of bytes: Data, type: BluetoothUUID) -> Any {
        switch type.shortValue {
        case 0x2900, 0x2902, 0x2903:
            let low = bytes.first ?? 0
            let high = bytes.dropFirst().first ?? 0
            return NSNumber(value: UInt16(low) | UInt16(high) << 8)
        case 0x2901:
            return String(decoding: bytes, as: UTF8.self)
        default:
            return bytes
        }
    }
}
