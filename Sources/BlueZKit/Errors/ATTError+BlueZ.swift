package import BlueZ

// The one table between ATT error codes and the errors of BlueZ (bluetoothd
// 5.66), in both directions, on BlueZ's error codes: the BlueZ layer turns
// them into and out of D-Bus errors.

extension ATTError.Code {
    /// The BlueZ error our GATT server replies with to make bluetoothd answer the
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
    package var bluezReplyError: (code: BlueZError.Code, message: String)? {
        switch self {
        case .success:
            return nil
        case .readNotPermitted:
            return (.notPermitted, "Read not permitted")
        case .writeNotPermitted:
            return (.notPermitted, "Write not permitted")
        case .insufficientAuthentication, .insufficientAuthorization, .insufficientEncryption:
            return (.notAuthorized, message)
        case .invalidOffset:
            return (.invalidOffset, "Invalid offset")
        case .invalidAttributeValueLength:
            return (.invalidValueLength, "Invalid value length")
        case .requestNotSupported:
            return (.notSupported, "Request not supported")
        case .other(0xFE):
            return (.inProgress, "Procedure already in progress")
        case .other(0xFD):
            return (.improperlyConfigured, "Client characteristic configuration improperly configured")
        default:
            return (.failed, Self.hex(byte))
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
    package init?(bluez error: BlueZError) {
        let message = error.message.lowercased()
        switch error.code {
        case .notPermitted:
            switch message {
            case "read not permitted": self = .readNotPermitted
            case "write not permitted": self = .writeNotPermitted
            case "not paired": self = .insufficientAuthentication
            default: return nil
            }
        case .invalidArguments:
            switch message {
            case "invalid offset": self = .invalidOffset
            case "invalid length": self = .invalidAttributeValueLength
            default: return nil
            }
        case .invalidOffset:
            self = .invalidOffset
        case .invalidValueLength:
            self = .invalidAttributeValueLength
        case .notAuthorized:
            self = .insufficientAuthorization
        case .notSupported:
            self = .requestNotSupported
        case .failed:
            guard let byte = error.attErrorCode else { return nil }
            self.init(byte)
        default:
            return nil
        }
    }
}

extension ATTError {
    /// The ATT error for a failed remote operation, from the D-Bus error
    /// BlueZ replied with, or `nil` when that error carries no ATT code.
    ///
    /// The code comes from ``Code/init(bluez:)``; the message is the code's
    /// standard one, and `underlying` keeps BlueZ's error.
    package init?(bluez error: BlueZError) {
        guard let code = Code(bluez: error) else { return nil }
        self.init(code, underlying: error)
    }
}

extension BlueZGattRequest {
    /// Answers with the BlueZ error that makes bluetoothd give the central `code` (see
    /// ``ATTError/Code/bluezReplyError``); ``ATTError/Code/success`` answers unlikelyError.
    func fail(with code: ATTError.Code) {
        let reply = code.bluezReplyError ?? ATTError.Code.unlikelyError.bluezReplyError!
        fail(reply.code, message: reply.message)
    }
}
