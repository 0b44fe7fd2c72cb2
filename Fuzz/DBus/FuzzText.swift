// Generated strings, object paths and names.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Generated strings and names

enum FuzzText {
    static let interesting = [
        "", "Value", "org.bluez.GattCharacteristic1", "org.bluez.Device1", "org.freedesktop.DBus.Properties",
        "PropertiesChanged", "/", "/org/bluez/hci0", "a{sv}", "0x80", "\u{FEFF}", "é", "\u{10FFFF}",
    ]

    /// Any Swift string (always valid UTF-8); NUL characters only when `allowNUL`.
    static func string(_ input: inout FuzzInput, allowNUL: Bool = false) -> String {
        if input.oneIn(4) { return interesting[input.below(interesting.count)] }
        let bytes = input.take(input.below(48))
        let cleaned = allowNUL ? bytes : bytes.map { $0 == 0 ? UInt8(ascii: "A") : $0 }
        return String(decoding: cleaned, as: UTF8.self)
    }

    static let pathCharacters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_".utf8)
    static let nameCharacters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-".utf8)

    /// A valid object path.
    static func objectPath(_ input: inout FuzzInput) -> String {
        let elements = input.below(5)
        guard elements > 0 else { return "/" }
        return (0..<elements).map { _ in
            "/"
                + String(
                    decoding: (0..<(1 + input.below(8))).map { _ in
                        pathCharacters[input.below(pathCharacters.count)]
                    }, as: UTF8.self)
        }.joined()
    }

    /// A dotted name that is often, not always, valid for `check`.
    static func dottedName(_ input: inout FuzzInput, unique: Bool = false) -> String {
        if input.oneIn(8) { return string(&input) }
        let parts = 1 + input.below(4)
        let name = (0..<parts).map { _ in
            String(
                decoding: (0..<(input.below(6))).map { _ in nameCharacters[input.below(nameCharacters.count)] },
                as: UTF8.self)
        }.joined(separator: ".")
        return unique ? ":" + name : name
    }

    static func member(_ input: inout FuzzInput) -> String {
        if input.oneIn(8) { return string(&input) }
        return String(
            decoding: (0..<(input.below(12))).map { _ in pathCharacters[input.below(pathCharacters.count)] },
            as: UTF8.self)
    }

    static func valid(
        _ s: String, _ check: (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t
    )
        -> Bool
    {
        !s.utf8.contains(0) && s.withCString { check($0, nil) } != 0
    }
}

/// One descriptor that generated `h` values duplicate (libdbus dups it when appending, and again when reading).
let fuzzDevNull: Int32 = open("/dev/null", O_RDONLY)
