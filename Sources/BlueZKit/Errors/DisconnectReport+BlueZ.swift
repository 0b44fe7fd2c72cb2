import BlueZ

extension DisconnectReport {
    /// The report of bluetoothd's `Device1.Disconnected` signal, or ``DisconnectReason/notReported``
    /// when there was none.
    init(_ disconnection: BlueZClient.Disconnection?) {
        guard let disconnection else {
            self.init(reason: .notReported, bluetoothdMessage: nil)
            return
        }
        let reason: DisconnectReason =
            switch disconnection.reason {
            case .timeout: .connectionTimeout
            case .remote: .remoteHost
            case .local: .localHost
            case .authentication: .authenticationFailure
            case .suspend: .localHostSuspend
            case .unknown, .other: .unknown
            }
        self.init(reason: reason, bluetoothdMessage: disconnection.message)
    }
}
