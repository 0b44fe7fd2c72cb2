/// The central manager's event streams beside the delegate: its states and its peripherals'
/// disconnections, buffered as ``CentralManager/discoveries()`` is and finished when the manager
/// is released.
extension CentralManager {
    /// A peripheral's link ended, as ``CentralManager/disconnections()`` reports it.
    public struct Disconnection: Sendable {
        /// The peripheral whose link ended.
        public let peripheral: Peripheral
        /// Why: nil when the app ended it (``CentralManager/cancelPeripheralConnection(_:)``),
        /// the error the delegate's `didDisconnectPeripheral` gets otherwise.
        public let error: BluetoothError?
        /// Whether the manager is connecting again by itself
        /// (``CBConnectPeripheralOptionEnableAutoReconnect``): `didConnect` follows.
        public let isReconnecting: Bool
    }

    /// Linux: the manager's state, now and at each change, beside the delegate's
    /// ``CentralManagerDelegate/centralManagerDidUpdateState(_:)``.
    ///
    /// The stream starts with the state the manager has reported so far (``ManagerState/unknown``
    /// before the first delegate call), then yields each change, on the manager's queue right after
    /// the delegate heard of it. A state the delegate hears twice in a row comes once. Wait for a
    /// state with `for await state in manager.states() where state == .poweredOn { break }`. It
    /// keeps the newest 256 states its consumer has not taken yet, and finishes when the manager is
    /// released (or its consumer's task is cancelled). No BlueZ call: the states come from what
    /// the manager follows (bluetoothd on the bus, the adapter's `Powered`).
    public func states() -> AsyncStream<ManagerState> {
        stateStreams.makeStream()
    }

    /// Linux: the disconnections of this manager's peripherals, from now on, beside the delegate's
    /// ``CentralManagerDelegate/centralManager(_:didDisconnectPeripheral:timestamp:isReconnecting:error:)``.
    ///
    /// Every `didDisconnectPeripheral` the delegate gets is yielded here too, in the same order,
    /// on the manager's queue right after the delegate call: a link lost (with the error), one the
    /// app cancelled (error nil), one lost while the manager reconnects (`isReconnecting`). A
    /// connect that fails for good is no disconnection (`didFailToConnect`). It keeps the newest
    /// 256 disconnections its consumer has not taken yet, and finishes when the manager is released
    /// (or its consumer's task is cancelled). No BlueZ call: they come from `Device1.Connected`
    /// and the manager's own requests.
    public func disconnections() -> AsyncStream<Disconnection> {
        disconnectionStreams.makeStream()
    }
}

extension StreamBroadcast<CentralManager.Disconnection> {
    /// Yields `change` when it ends the link of `peripheral` (on the manager's queue, after the delegate).
    func send(_ change: CentralManager.LinkEvent, of peripheral: Peripheral) {
        switch change {
        case .disconnected(let error):
            send(CentralManager.Disconnection(peripheral: peripheral, error: error, isReconnecting: false))
        case .disconnectedReconnecting(let error):
            send(CentralManager.Disconnection(peripheral: peripheral, error: error, isReconnecting: true))
        case .connecting, .connected, .adopted, .disconnecting, .failed:
            break
        }
    }
}
