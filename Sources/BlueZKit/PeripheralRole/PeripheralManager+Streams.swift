/// The peripheral manager's event streams beside the delegate: its states and the subscriptions
/// of centrals, buffered as ``CentralManager/discoveries()`` is and finished when the manager is
/// released.
extension PeripheralManager {
    /// A central subscribed to or unsubscribed from a characteristic, as
    /// ``PeripheralManager/subscriptions()`` reports it.
    public struct Subscription: Sendable {
        /// The central.
        public let central: Central
        /// The characteristic, one of this manager's published ones.
        public let characteristic: MutableCharacteristic
        /// True when the central subscribed (`didSubscribeTo`), false when it unsubscribed or its
        /// link ended (`didUnsubscribeFrom`).
        public let isSubscribed: Bool
    }

    /// Linux: the manager's state, now and at each change, beside the delegate's
    /// ``PeripheralManagerDelegate/peripheralManagerDidUpdateState(_:)``.
    ///
    /// The stream starts with the state the manager has reported so far (``ManagerState/unknown``
    /// before the first delegate call), then yields each change, on the manager's queue right after
    /// the delegate heard of it. It keeps the newest 256 states its consumer has not taken yet, and
    /// finishes when the manager is released (or its consumer's task is cancelled). No BlueZ
    /// call: the states come from what the manager follows (bluetoothd on the bus, the adapter's
    /// `Powered`).
    public func states() -> AsyncStream<ManagerState> {
        stateStreams.makeStream()
    }

    /// Linux: the subscriptions of centrals to this manager's characteristics, from now on,
    /// beside the delegate's `didSubscribeTo` and `didUnsubscribeFrom`.
    ///
    /// Every call of either delegate method is yielded here too, in the same order, on the
    /// manager's queue right after the delegate call, whether a delegate is set or not. The
    /// centrals are told apart as precisely as bluetoothd lets the delegate do it (exactly from
    /// bluetoothd 5.79, through `AcquireNotify`; inferred before, see
    /// ``PeripheralManagerDelegate/peripheralManager(_:central:didSubscribeTo:)-(_,_,Characteristic)``).
    /// It keeps the newest 256 events its consumer has not taken yet, and finishes when the manager
    /// is released (or its consumer's task is cancelled).
    public func subscriptions() -> AsyncStream<Subscription> {
        subscriptionStreams.makeStream()
    }
}
