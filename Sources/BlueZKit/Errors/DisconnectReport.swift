/// Linux: what bluetoothd said about the end of a peripheral's link: the ``BluetoothError/underlying``
/// error of the error that `centralManager(_:didDisconnectPeripheral:error:)` receives.
///
/// Made from bluetoothd's `Device1.Disconnected(reason, message)` signal (5.83 and later), or,
/// when bluetoothd sent none, with ``DisconnectReason/notReported`` and no message. Two reports
/// are equal when their reasons and messages are.
public struct DisconnectReport: Error, Hashable, Sendable, CustomStringConvertible {
    /// Why the link ended.
    public let reason: DisconnectReason
    /// bluetoothd's sentence for the reason, as it sent it (such as "Connection terminated by
    /// remote user"); `nil` when it sent no `Disconnected` signal.
    public let bluetoothdMessage: String?

    /// A report of `reason` with bluetoothd's `bluetoothdMessage`.
    public init(reason: DisconnectReason, bluetoothdMessage: String?) {
        self.reason = reason
        self.bluetoothdMessage = bluetoothdMessage
    }

    /// The reason and bluetoothd's sentence, for logs.
    public var description: String {
        guard let bluetoothdMessage else { return "\(reason) (bluetoothd gave no reason)" }
        return "\(reason) (bluetoothd: \(bluetoothdMessage))"
    }

    /// The error that reports the link's end: the reason's Core Bluetooth code, its explanation
    /// and bluetoothd's sentence as the message, and this report as the underlying error.
    var error: BluetoothError {
        let said = bluetoothdMessage.map { " bluetoothd: \"\($0)\"." } ?? ""
        return BluetoothError(reason.errorCode, message: reason.explanation + said, underlying: self)
    }
}
