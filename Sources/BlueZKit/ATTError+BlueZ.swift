// The one table between ATT error codes and the D-Bus errors of BlueZ
// (bluetoothd 5.66), in both directions. Plain strings in and out: the BlueZ
// mapping code turns them into and out of D-Bus messages.

extension ATTError.Code {
    /// The D-Bus error name prefix of bluetoothd's errors.
    private static let prefix = "org.bluez.Error."

    /// The D-Bus error our GATT server replies with to make BlueZ answer the
    /// remote central with this code, or `nil` for ``success`` (reply
    /// normally).
    ///
    /// BlueZ turns the error of a `ReadValue` / `WriteValue` reply into an ATT
    /// code with `dbus_error_to_att_ecode` (`src/gatt-database.c`):
    ///
    /// | code | reply | what the central gets |
    /// | --- | --- | --- |
    /// | readNotPermitted, writeNotPermitted | `NotPermitted` | read / write not permitted, by the request's kind |
    /// | insufficientAuthentication, insufficientAuthorization, insufficientEncryption | `NotAuthorized` | insufficientAuthorization (0x08): BlueZ has no other security reply |
    /// | invalidOffset | `InvalidOffset` | invalidOffset |
    /// | invalidAttributeValueLength | `InvalidValueLength` | invalidAttributeValueLength |
    /// | requestNotSupported | `NotSupported` | requestNotSupported |
    /// | application 0x80–0x9F | `Failed`, message `"0x8N"` | that code |
    /// | 0xFE procedure already in progress | `InProgress` | 0xFE |
    /// | 0xFD CCC descriptor improperly configured | `ImproperlyConfigured` | 0xFD (newer BlueZ; 5.66: unlikelyError) |
    /// | anything else | `Failed`, message `"0xNN"` | unlikelyError (0x0E) |
    ///
    /// For the last row BlueZ 5.66 parses the number, finds it outside
    /// 0x80–0x9F, logs "Invalid error code" and answers unlikelyError — the
    /// closest it can express. A message without a number would instead
    /// become application error 0x80, which would misreport the failure.
    package var bluezReplyError: (name: String, message: String)? {
        let prefix = Self.prefix
        switch self {
        case .success:
            return nil
        case .readNotPermitted:
            return (prefix + "NotPermitted", "Read not permitted")
        case .writeNotPermitted:
            return (prefix + "NotPermitted", "Write not permitted")
        case .insufficientAuthentication, .insufficientAuthorization, .insufficientEncryption:
            return (prefix + "NotAuthorized", message)
        case .invalidOffset:
            return (prefix + "InvalidOffset", "Invalid offset")
        case .invalidAttributeValueLength:
            return (prefix + "InvalidValueLength", "Invalid value length")
        case .requestNotSupported:
            return (prefix + "NotSupported", "Request not supported")
        case .other(0xFE):
            return (prefix + "InProgress", "Procedure already in progress")
        case .other(0xFD):
            return (prefix + "ImproperlyConfigured", "Client characteristic configuration improperly configured")
        default:
            return (prefix + "Failed", Self.hex(byte))
        }
    }

    /// The ATT code of a failed remote read, write or subscription, from the
    /// D-Bus error BlueZ replied with, or `nil` when the error does not
    /// carry one (not connected, another operation in progress, bad
    /// arguments, …: the caller reports those as a ``BluetoothError``).
    ///
    /// BlueZ makes these errors in `create_gatt_dbus_error`
    /// (`src/gatt-client.c`):
    ///
    /// | BlueZ error | message | code |
    /// | --- | --- | --- |
    /// | `NotPermitted` | `Read not permitted` | readNotPermitted |
    /// | `NotPermitted` | `Write not permitted` | writeNotPermitted |
    /// | `NotPermitted` | `Not paired` | insufficientAuthentication (BlueZ uses it for 0x05, 0x0C and 0x0F alike) |
    /// | `InvalidArguments` | `Invalid offset` | invalidOffset |
    /// | `InvalidArguments` | `Invalid Length` | invalidAttributeValueLength |
    /// | `NotAuthorized` | any | insufficientAuthorization |
    /// | `NotSupported` | any | requestNotSupported |
    /// | `Failed` | `Operation failed with ATT error: 0xNN` (or any message containing `ATT error: 0xNN`) | 0xNN |
    ///
    /// The names `InvalidOffset` and `InvalidValueLength`, which our own GATT
    /// server replies with, map to their codes too. Messages are compared
    /// without regard to case.
    package init?(bluezErrorName name: String, message: String) {
        guard name.hasPrefix(Self.prefix) else { return nil }
        let message = message.lowercased()
        switch name.dropFirst(Self.prefix.count) {
        case "NotPermitted":
            switch message {
            case "read not permitted": self = .readNotPermitted
            case "write not permitted": self = .writeNotPermitted
            case "not paired": self = .insufficientAuthentication
            default: return nil
            }
        case "InvalidArguments":
            switch message {
            case "invalid offset": self = .invalidOffset
            case "invalid length": self = .invalidAttributeValueLength
            default: return nil
            }
        case "InvalidOffset":
            self = .invalidOffset
        case "InvalidValueLength":
            self = .invalidAttributeValueLength
        case "NotAuthorized":
            self = .insufficientAuthorization
        case "NotSupported":
            self = .requestNotSupported
        case "Failed":
            guard let byte = Self.attByte(in: message) else { return nil }
            self.init(byte)
        default:
            return nil
        }
    }

    /// The byte after `att error: 0x` in a lower-cased message: one or two
    /// hexadecimal digits, followed by the end of the message or a
    /// non-hexadecimal character.
    private static func attByte(in message: String) -> UInt8? {
        guard let marker = message.range(of: "att error: 0x") else { return nil }
        let digits = message[marker.upperBound...].prefix { $0.isHexDigit }
        guard (1...2).contains(digits.count) else { return nil }
        return UInt8(digits, radix: 16)
    }
}

extension ATTError {
    /// The ATT error for a failed remote operation, from the D-Bus error
    /// BlueZ replied with, or `nil` when that error carries no ATT code.
    ///
    /// The code comes from ``Code/init(bluezErrorName:message:)``; the
    /// message is the code's standard one, and `underlying` keeps the
    /// original error.
    package init?(bluezErrorName name: String, message: String, underlying: (any Error & Sendable)? = nil) {
        guard let code = Code(bluezErrorName: name, message: message) else { return nil }
        self.init(code, underlying: underlying)
    }
}
