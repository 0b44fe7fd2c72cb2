package import BlueZ

// ATT error codes to and from BlueZ's errors. The BlueZ layer reads and writes the codes in
// bluetoothd's errors (`BlueZError.attCode`, `BlueZError(attReply:description:)`); this maps
// the bytes to and from `ATTError.Code`.

extension ATTError.Code {
    /// The BlueZ error our GATT server replies with to make bluetoothd answer the
    /// remote central with this code, or `nil` for ``success`` (reply normally).
    ///
    /// `BlueZError(attReply:description:)` has the table; the security codes
    /// (insufficientAuthentication, insufficientAuthorization, insufficientEncryption)
    /// all reach the central as insufficientAuthorization, with this code's ``message``.
    package var bluezReplyError: BlueZError? {
        BlueZError(attReply: byte, description: message)
    }

    /// The ATT code of a failed remote read, write or subscription, from the
    /// error BlueZ replied with (`BlueZError.attCode`), or `nil` when the error
    /// does not carry one (not connected, another operation in progress, bad
    /// arguments, …: the caller reports those as a ``BluetoothError``).
    package init?(bluez error: BlueZError) {
        guard let byte = error.attCode else { return nil }
        self.init(byte)
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
