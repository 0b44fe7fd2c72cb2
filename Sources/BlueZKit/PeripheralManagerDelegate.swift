/// The methods a peripheral manager calls to report its state, its services,
/// advertising and the requests of centrals.
///
/// Every method is called on the manager's `queue`, in order. All but
/// ``peripheralManagerDidUpdateState(_:)`` have empty default implementations.
public protocol PeripheralManagerDelegate: AnyObject {
    /// The manager's ``PeripheralManager/state`` changed.
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager)
    /// ``PeripheralManager/add(_:)`` finished (`GattManager1.RegisterApplication` answered).
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?)
    /// ``PeripheralManager/startAdvertising(_:)-([String:Any]?)`` finished.
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?)
    /// A central reads a dynamic characteristic: set `request.value`, then call
    /// ``PeripheralManager/respond(to:withResult:)`` exactly once.
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest)
    /// A central writes: answer the first request with ``PeripheralManager/respond(to:withResult:)``
    /// (writes without response need no answer).
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest])
    /// A central enabled notifications or indications of `characteristic` (it wrote the CCC descriptor;
    /// bluetoothd called our `StartNotify`).
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic)
    /// A central disabled notifications or indications of `characteristic`, or its link went down.
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic)
    /// ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)`` returned false earlier and
    /// there is room again: send the value that did not go out.
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager)
    /// The manager was created with a restore identifier that has saved state: this is the
    /// first delegate call, before ``peripheralManagerDidUpdateState(_:)``.
    ///
    /// `dict` holds ``CBPeripheralManagerRestoredStateServicesKey`` (`[MutableService]`, the
    /// services published before, rebuilt, with the ``MutableCharacteristic/subscribedCentrals``
    /// saved last) and ``CBPeripheralManagerRestoredStateAdvertisementDataKey``
    /// (`[String: Any]`) when it was advertising. The manager publishes the services and
    /// advertises again on its own once the adapter is powered on; `didAdd` is not called for them.
    /// bluetoothd ended the restored subscriptions with the earlier process: right after the
    /// first ``peripheralManagerDidUpdateState(_:)`` each restored subscribed central gets
    /// ``peripheralManager(_:central:didUnsubscribeFrom:)``, and `didSubscribeTo` when it
    /// subscribes again.
    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any])
}

extension PeripheralManagerDelegate {
    /// Does nothing.
    public func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?)
    {}
    /// Does nothing.
    public func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {}
    /// Answers `requestNotSupported`, so that an app without this method does not leave centrals waiting.
    public func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        peripheral.respond(to: request, withResult: .requestNotSupported)
    }
    /// Answers `requestNotSupported`.
    public func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        if let first = requests.first { peripheral.respond(to: first, withResult: .requestNotSupported) }
    }
    /// Does nothing.
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {}
    /// Does nothing.
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {}
    /// Does nothing.
    public func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {}
    /// Does nothing.
    public func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any]) {}
}
