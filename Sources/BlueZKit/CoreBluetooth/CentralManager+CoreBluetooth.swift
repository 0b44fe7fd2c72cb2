extension CentralManager {
    /// Creates a manager without a delegate, on the main queue, as Core Bluetooth's `CBCentralManager()`;
    /// set ``delegate`` before the first state update arrives.
    public convenience init() {
        self.init(delegate: nil, queue: nil)
    }
}
