/// The methods a peripheral manager calls to report its state, its services,
/// advertising and the requests of centrals.
///
/// Every method is called on the manager's `queue`, in order. All but
/// ``peripheralManagerDidUpdateState(_:)`` have default implementations.
///
/// `didAdd`, `didSubscribeTo` and `didUnsubscribeFrom` have Core Bluetooth's
/// signatures (``Service``, ``Characteristic``), which the manager calls, and typed
/// Linux ones (``MutableService``, ``MutableCharacteristic``) that their default
/// implementations call: implement either (see ``CentralManagerDelegate`` for the rule).
public protocol PeripheralManagerDelegate: AnyObject {
    /// The manager's ``PeripheralManager/state`` changed.
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager)
    /// ``PeripheralManager/add(_:)`` finished (`GattManager1.RegisterApplication` answered): Core
    /// Bluetooth's signature, the one the manager calls.
    ///
    /// `service` is the ``MutableService`` that was added. The default implementation calls
    /// ``peripheralManager(_:didAdd:error:)-(_,MutableService,_)``.
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?)
    /// ``PeripheralManager/add(_:)`` finished, typed: the Linux variant, called by the default
    /// implementation of Core Bluetooth's method.
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
    /// bluetoothd called our `StartNotify`): Core Bluetooth's signature, the one the manager calls.
    ///
    /// `characteristic` is the ``MutableCharacteristic`` you published. The default
    /// implementation calls ``peripheralManager(_:central:didSubscribeTo:)-(_,_,MutableCharacteristic)``.
    ///
    /// Also called when the link of a bonded central that was subscribed when its link dropped
    /// is back (`Device1.Connected` true): bluetoothd keeps its CCC value and does not call the
    /// application again, as Core Bluetooth keeps a bonded central's subscription.
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic)
    /// A central enabled notifications or indications, typed: the Linux variant, called by the
    /// default implementation of Core Bluetooth's method.
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic)
    /// A central disabled notifications or indications of `characteristic`, or its link went down:
    /// Core Bluetooth's signature, the one the manager calls.
    ///
    /// The default implementation calls
    /// ``peripheralManager(_:central:didUnsubscribeFrom:)-(_,_,MutableCharacteristic)``.
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic)
    /// A central disabled notifications or indications, typed: the Linux variant, called by the
    /// default implementation of Core Bluetooth's method.
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
    /// ``peripheralManager(_:central:didUnsubscribeFrom:)-(_,_,Characteristic)``, and `didSubscribeTo` when it
    /// subscribes again.
    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any])
    // L2CAP channels (see PeripheralManager+L2CAP.swift for what each reports).
    /// ``PeripheralManager/publishL2CAPChannel(withEncryption:)`` finished: the PSM, or the error.
    func peripheralManager(_ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?)
    /// ``PeripheralManager/unpublishL2CAPChannel(_:)`` finished.
    func peripheralManager(_ peripheral: PeripheralManager, didUnpublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?)
    /// A central opened a channel to a published PSM.
    func peripheralManager(_ peripheral: PeripheralManager, didOpen channel: L2CAPChannel?, error: (any Error)?)
}

extension PeripheralManagerDelegate {
    /// Calls ``peripheralManager(_:didAdd:error:)-(_,MutableService,_)``.
    public func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        guard let service = service as? MutableService else { return }
        peripheralManager(peripheral, didAdd: service, error: error)
    }
    /// Calls ``peripheralManager(_:central:didSubscribeTo:)-(_,_,MutableCharacteristic)``.
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        guard let characteristic = characteristic as? MutableCharacteristic else { return }
        peripheralManager(peripheral, central: central, didSubscribeTo: characteristic)
    }
    /// Calls ``peripheralManager(_:central:didUnsubscribeFrom:)-(_,_,MutableCharacteristic)``.
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        guard let characteristic = characteristic as? MutableCharacteristic else { return }
        peripheralManager(peripheral, central: central, didUnsubscribeFrom: characteristic)
    }
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
