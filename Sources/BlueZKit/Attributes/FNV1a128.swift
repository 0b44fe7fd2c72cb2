/// The 128-bit FNV-1a hash (Fowler–Noll–Vo): peripheral identifiers are derived from it, and
/// the restoration store names the files of long restore identifiers with it.
///
/// It is not a cryptographic hash; the store does not rely on it being
/// collision-free, because each file also holds its identifier.
package enum FNV1a128 {
    /// The 128-bit FNV offset basis, 0x6c62272e07bb014262b821756295c58d.
    private static let offsetBasis: (high: UInt64, low: UInt64) = (0x6c62_272e_07bb_0142, 0x62b8_2175_6295_c58d)
    /// The low part of the 128-bit FNV prime 2^88 + 0x13B.
    private static let primeLow: UInt64 = 0x13B

    /// The hash of `bytes` as two 64-bit halves.
    package static func hash(_ bytes: some Sequence<UInt8>) -> (high: UInt64, low: UInt64) {
        var (high, low) = offsetBasis
        for byte in bytes {
            low ^= UInt64(byte)
            // (high·2^64 + low) · (2^88 + 0x13B) mod 2^128.
            let product = low.multipliedFullWidth(by: primeLow)
            high = high &* primeLow &+ product.high &+ (low << 24)
            low = product.low
        }
        return (high, low)
    }

    /// The hash of `bytes` as 32 lowercase hex digits, high half first.
    package static func hexDigest(of bytes: some Sequence<UInt8>) -> String {
        let (high, low) = hash(bytes)
        return RestorationStore.hexString(
            (0..<16).map { index in
                UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (56 - 8 * UInt64(index % 8)))
            })
    }
}
