/// A characteristic's or descriptor's flags (BlueZ's server-side vocabulary, as in
/// `org.bluez.GattCharacteristic1.Flags`) split into what the peer sees and what it needs.
///
/// The peer (bluetoothd's GATT client) sees only the characteristic
/// properties and extended properties; the permissions (`encrypt-read`,
/// `secure-write`, …) decide how the simulated server answers.
struct AttributeFlags: Sendable, Hashable {
    /// Security an operation needs.
    enum Security: Int, Sendable, Comparable {
        case none, encrypted, authenticated, secure
        static func < (a: Security, b: Security) -> Bool { a.rawValue < b.rawValue }
    }

    /// Characteristic properties bit field (Core Vol 3, Part G, 3.3.1.1).
    var properties: UInt8 = 0
    /// Extended properties bit field (reliable write, writable auxiliaries).
    var extendedProperties: UInt8 = 0
    var readable = false
    var writable = false
    var readSecurity = Security.none
    var writeSecurity = Security.none

    static let broadcast: UInt8 = 0x01
    static let read: UInt8 = 0x02
    static let writeWithoutResponse: UInt8 = 0x04
    static let write: UInt8 = 0x08
    static let notify: UInt8 = 0x10
    static let indicate: UInt8 = 0x20
    static let signedWrite: UInt8 = 0x40
    static let extended: UInt8 = 0x80
    static let reliableWrite: UInt8 = 0x01
    static let writableAuxiliaries: UInt8 = 0x02

    /// Parses `flags`; returns the first unknown flag as the failure.
    static func parse(_ flags: [String]) -> Result<AttributeFlags, UnknownFlag> {
        var result = AttributeFlags()
        for flag in flags {
            switch flag {
            case "broadcast": result.properties |= broadcast
            case "read": result.allowRead(.none)
            case "write-without-response":
                result.properties |= writeWithoutResponse
                result.writable = true
            case "write": result.allowWrite(.none)
            case "notify", "encrypt-notify", "encrypt-authenticated-notify", "secure-notify":
                result.properties |= notify
            case "indicate", "encrypt-indicate", "encrypt-authenticated-indicate", "secure-indicate":
                result.properties |= indicate
            case "authenticated-signed-writes":
                result.properties |= signedWrite
                result.writable = true
            case "extended-properties": result.properties |= extended
            case "reliable-write":
                result.properties |= extended
                result.extendedProperties |= reliableWrite
                result.writable = true
            case "writable-auxiliaries":
                result.properties |= extended
                result.extendedProperties |= writableAuxiliaries
            case "encrypt-read": result.allowRead(.encrypted)
            case "encrypt-write": result.allowWrite(.encrypted)
            case "encrypt-authenticated-read": result.allowRead(.authenticated)
            case "encrypt-authenticated-write": result.allowWrite(.authenticated)
            case "secure-read": result.allowRead(.secure)
            case "secure-write": result.allowWrite(.secure)
            case "authorize": break
            default: return .failure(UnknownFlag(flag: flag))
            }
        }
        return .success(result)
    }

    private mutating func allowRead(_ security: Security) {
        properties |= Self.read
        readable = true
        readSecurity = max(readSecurity, security)
    }

    private mutating func allowWrite(_ security: Security) {
        properties |= Self.write
        writable = true
        writeSecurity = max(writeSecurity, security)
    }

    /// The flags bluetoothd 5.66 reports for a remote characteristic, in its order
    /// (`characteristic_get_flags`): only properties, never permissions.
    var remoteFlags: [String] {
        let names: [(UInt8, String)] = [
            (Self.broadcast, "broadcast"), (Self.read, "read"),
            (Self.writeWithoutResponse, "write-without-response"), (Self.write, "write"),
            (Self.notify, "notify"), (Self.indicate, "indicate"),
            (Self.signedWrite, "authenticated-signed-writes"), (Self.extended, "extended-properties"),
        ]
        var flags = names.filter { properties & $0.0 != 0 }.map(\.1)
        if extendedProperties & Self.reliableWrite != 0 { flags.append("reliable-write") }
        if extendedProperties & Self.writableAuxiliaries != 0 { flags.append("writable-auxiliaries") }
        return flags
    }

    var canNotify: Bool { properties & (Self.notify | Self.indicate) != 0 }

    /// A flag the parser does not know.
    struct UnknownFlag: Error, Sendable {
        let flag: String
    }
}
