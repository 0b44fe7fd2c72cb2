extension PeripheralManager {
    /// Creates a manager without a delegate, on the main queue, as Core Bluetooth's `CBPeripheralManager()`;
    /// set ``delegate`` before the first state update arrives.
    public convenience init() {
        self.init(delegate: nil, queue: nil)
    }
}
