// File names of the restoration store. A restore identifier is a key, never a
// path: its file name is made only of ASCII letters, digits, `-` and `.`, so
// no identifier ("", "..", "a/b", NUL, 10,000 characters, …) can name a file
// outside the store directory or an invalid file name.

extension RestorationStore {
    /// Identifiers of at most this many UTF-8 bytes are stored under the
    /// lowercase hex of their UTF-8 (`id-<hex>.json`, at most 208
    /// characters); longer ones under a 128-bit hash (`hash-<32 hex>.json`).
    package static let maximumHexEncodedIdentifierBytes = 100
    /// The extension of a state file.
    package static let stateFileExtension = ".json"
    /// What is appended to a state file's name when loading found it
    /// unreadable and moved it aside.
    package static let unreadableSuffix = ".unreadable"
    /// The name prefix of the temporary files a save writes before renaming.
    package static let temporaryFilePrefix = ".tmp-"

    private static let hexEncodedPrefix = "id-"
    private static let hashedPrefix = "hash-"

    /// The name of the file that holds the state saved for `identifier`.
    ///
    /// Short identifiers give `id-` and the lowercase hex of their UTF-8
    /// bytes, which is injective, so distinct identifiers never share a
    /// file. Longer ones give `hash-` and the FNV-1a-128 hash of the UTF-8
    /// bytes; the file also stores the identifier, and loading compares it,
    /// so a collision is reported rather than returning another identifier's
    /// state. Identifiers are compared by their UTF-8 bytes, not by Unicode
    /// canonical equivalence.
    package static func fileName(for identifier: String) -> String {
        let bytes = Array(identifier.utf8)
        if bytes.count <= maximumHexEncodedIdentifierBytes {
            return hexEncodedPrefix + hexString(bytes) + stateFileExtension
        }
        return hashedPrefix + FNV1a128.hexDigest(of: bytes) + stateFileExtension
    }

    /// Whether `name` has the form of a state file name: `id-<even number of
    /// lowercase hex digits>.json` or `hash-<32 lowercase hex digits>.json`.
    ///
    /// Temporary files, `.unreadable` copies and anything else a user put in
    /// the directory are not.
    package static func isStateFileName(_ name: String) -> Bool {
        guard name.hasSuffix(stateFileExtension) else { return false }
        let stem = name.dropLast(stateFileExtension.count)
        if stem.hasPrefix(hexEncodedPrefix) {
            let digits = stem.dropFirst(hexEncodedPrefix.count)
            return digits.count.isMultiple(of: 2) && digits.count <= 2 * maximumHexEncodedIdentifierBytes
                && digits.utf8.allSatisfy(isLowercaseHexDigit)
        }
        if stem.hasPrefix(hashedPrefix) {
            let digits = stem.dropFirst(hashedPrefix.count)
            return digits.utf8.count == 32 && digits.utf8.allSatisfy(isLowercaseHexDigit)
        }
        return false
    }

    private static func isLowercaseHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    static func hexString(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
