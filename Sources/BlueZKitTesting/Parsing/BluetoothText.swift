/// Parsing and formatting of the text forms BlueZ uses for UUIDs and device addresses.
///
/// BlueZ reports every UUID in its 128-bit lowercase form and accepts 16-bit,
/// 32-bit and 128-bit forms on input (`bt_string_to_uuid`); addresses are
/// `AA:BB:CC:DD:EE:FF` and appear in object paths as `dev_AA_BB_CC_DD_EE_FF`.
enum BluetoothText {
    /// The Bluetooth base UUID after the first 32 bits.
    static let baseSuffix = "-0000-1000-8000-00805f9b34fb"

    /// The 128-bit lowercase form of a 16-bit, 32-bit (optionally `0x`-prefixed) or 128-bit UUID; nil when invalid.
    static func uuid(_ text: String) -> String? {
        var body = Substring(text)
        if body.hasPrefix("0x") || body.hasPrefix("0X") { body = body.dropFirst(2) }
        let lower = body.lowercased()
        switch lower.count {
        case 4 where isHex(lower):
            return "0000" + lower + baseSuffix
        case 8 where isHex(lower):
            return lower + baseSuffix
        case 36 where body.count == text.count:
            let groups = lower.split(separator: "-", omittingEmptySubsequences: false)
            guard groups.map(\.count) == [8, 4, 4, 4, 12], groups.allSatisfy({ isHex($0) }) else { return nil }
            return lower
        default:
            return nil
        }
    }

    /// The canonical upper-case form of a `AA:BB:CC:DD:EE:FF` address; nil when invalid.
    static func address(_ text: String) -> String? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && isHex($0) }) else { return nil }
        return parts.map { $0.uppercased() }.joined(separator: ":")
    }

    /// The object-path element of a device: `dev_AA_BB_CC_DD_EE_FF`.
    static func deviceElement(_ address: String) -> String {
        "dev_" + String(address.map { $0 == ":" ? "_" : $0 })
    }

    /// The alias BlueZ shows for a device without a name: the address with dashes.
    static func dashedAddress(_ address: String) -> String {
        String(address.map { $0 == ":" ? "-" : $0 })
    }

    /// Four lowercase hex digits, as in `service000a`.
    static func handle(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func isHex<S: StringProtocol>(_ text: S) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy {
                ("0"..."9").contains($0) || ("a"..."f").contains($0) || ("A"..."F").contains($0)
            }
    }
}
