// bluetoothd's vocabulary for ATT error codes, in both directions (bluetoothd 5.66): the codes
// it puts in the errors of remote GATT operations, and the errors our GATT server answers with
// to make it send a code. The layer above maps the bytes to its own ATT error type.

extension BlueZError {
    /// The ATT error code of a failed remote read, write or subscription, read from the
    /// error's name and message, or `nil` when the error does not carry one (not connected,
    /// another operation in progress, bad arguments, …).
    ///
    /// bluetoothd makes these errors in `create_gatt_dbus_error` (`src/gatt-client.c`):
    ///
    /// | error | message | code |
    /// | --- | --- | --- |
    /// | `NotPermitted` | `Read not permitted` | 0x02 read not permitted |
    /// | `NotPermitted` | `Write not permitted` | 0x03 write not permitted |
    /// | `NotPermitted` | `Not paired` | 0x05 insufficient authentication (bluetoothd uses it for 0x05, 0x0C and 0x0F alike) |
    /// | `InvalidArguments` | `Invalid offset` | 0x07 invalid offset |
    /// | `InvalidArguments` | `Invalid Length` | 0x0D invalid attribute value length |
    /// | `NotAuthorized` | any | 0x08 insufficient authorization |
    /// | `NotSupported` | any | 0x06 request not supported |
    /// | `Failed` | `Operation failed with ATT error: 0xNN` (or any message containing `ATT error: 0xNN`) | 0xNN |
    ///
    /// The names `InvalidOffset` and `InvalidValueLength`, which our own GATT server replies
    /// with, map to their codes too. Messages are compared without regard to case.
    package var attCode: UInt8? {
        let message = message.lowercased()
        switch code {
        case .notPermitted:
            switch message {
            case "read not permitted": return 0x02
            case "write not permitted": return 0x03
            case "not paired": return 0x05
            default: return nil
            }
        case .invalidArguments:
            switch message {
            case "invalid offset": return 0x07
            case "invalid length": return 0x0D
            default: return nil
            }
        case .invalidOffset: return 0x07
        case .invalidValueLength: return 0x0D
        case .notAuthorized: return 0x08
        case .notSupported: return 0x06
        case .failed:
            guard let marker = message.range(of: "att error: 0x") else { return nil }
            let digits = message[marker.upperBound...].prefix { $0.isHexDigit }
            guard (1...2).contains(digits.count) else { return nil }
            return UInt8(digits, radix: 16)
        default: return nil
        }
    }

    /// The error our GATT server replies with to a `ReadValue` / `WriteValue` call to make
    /// bluetoothd answer the remote central with ATT error `attCode`, or `nil` for 0 (reply
    /// normally). `description` is the message of the security errors (0x05, 0x08, 0x0F).
    ///
    /// bluetoothd turns the reply into an ATT code with `dbus_error_to_att_ecode`
    /// (`src/gatt-database.c`):
    ///
    /// | code | reply | what the central gets |
    /// | --- | --- | --- |
    /// | 0x02, 0x03 | `NotPermitted` | read / write not permitted, by the request's kind |
    /// | 0x05, 0x08, 0x0F | `NotAuthorized` | 0x08: bluetoothd has no other security reply |
    /// | 0x07 | `InvalidOffset` | 0x07 |
    /// | 0x0D | `InvalidValueLength` | 0x0D |
    /// | 0x06 | `NotSupported` | 0x06 |
    /// | application 0x80–0x9F | `Failed`, message `"0x8N"` | that code |
    /// | 0xFE procedure already in progress | `InProgress` | 0xFE |
    /// | 0xFD CCC descriptor improperly configured | `ImproperlyConfigured` | 0xFD (newer BlueZ; 5.66: 0x0E) |
    /// | anything else | `Failed`, message `"0xNN"` | 0x0E unlikely error |
    ///
    /// For the last row bluetoothd 5.66 parses the number, finds it outside 0x80–0x9F, logs
    /// "Invalid error code" and answers 0x0E, the closest it can express. A message without
    /// a number would instead become application error 0x80, which would misreport the failure.
    package init?(attReply attCode: UInt8, description: String) {
        switch attCode {
        case 0x00: return nil
        case 0x02: self.init(.notPermitted, "Read not permitted")
        case 0x03: self.init(.notPermitted, "Write not permitted")
        case 0x05, 0x08, 0x0F: self.init(.notAuthorized, description)
        case 0x07: self.init(.invalidOffset, "Invalid offset")
        case 0x0D: self.init(.invalidValueLength, "Invalid value length")
        case 0x06: self.init(.notSupported, "Request not supported")
        case 0xFE: self.init(.inProgress, "Procedure already in progress")
        case 0xFD: self.init(.improperlyConfigured, "Client characteristic configuration improperly configured")
        default:
            let digits = String(attCode, radix: 16)
            self.init(.failed, "0x" + (digits.count == 1 ? "0" : "") + digits)
        }
    }
}
