public import Foundation

/// The GATT mode's framing: each write carries where its bytes belong in the transfer.
///
/// A frame is the payload's offset in the pattern (a little-endian `UInt32`) followed by the
/// payload. bluetoothd spreads writes without response and notifications over its Enhanced
/// ATT bearers (`Channels = 3` in `main.conf` by default), so they can arrive in another order
/// than they were sent (5.66 reordered two thirds of the frames in the emulated environment); the offset lets the central put the echo back
/// in order, and tell a reordered frame from a lost or repeated one. The peripheral echoes each
/// frame as it came. (An L2CAP channel keeps order: the L2CAP mode sends bare bytes.)
public enum UARTFrame {
    /// Bytes of the header.
    public static let headerLength = 4

    /// A frame: `offset`'s header, then `payload`.
    public static func make(offset: Int, payload: Data) -> Data {
        let value = UInt32(truncatingIfNeeded: offset)
        var frame = Data([
            UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24),
        ])
        frame.append(payload)
        return frame
    }

    /// The offset and payload of a frame; nil when it is too short to hold a header and a byte.
    public static func parse(_ frame: Data) -> (offset: Int, payload: Data)? {
        guard frame.count > headerLength else { return nil }
        let bytes = frame.prefix(headerLength).map(UInt32.init)
        let offset = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24
        return (Int(offset), Data(frame.dropFirst(headerLength)))
    }
}
