/// The methods a central manager calls to report its state and its discoveries.
///
/// Every method is called on the manager's `queue` (the main queue when it
/// was created with nil), in the order the events happened. All but
/// ``centralManagerDidUpdateState(_:)`` have empty default implementations.
public protocol CentralManagerDelegate: AnyObject {
    /// The manager's ``CentralManager/state`` changed; read it to see the new value.
    ///
    /// The first call follows creation once the library has talked to
    /// bluetoothd (or found it missing). Scanning is possible in `.poweredOn` only.
    func centralManagerDidUpdateState(_ central: CentralManager)

    /// A scan saw an advertisement from `peripheral`.
    ///
    /// `rssi` is the received signal strength in dBm. Without
    /// `allowDuplicates` a peripheral is reported once per scan, and again only
    /// when its advertisement data changes.
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int)

    /// A connection requested with ``CentralManager/connect(_:options:)`` was established.
    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral)

    /// A connection request failed for good (an error that no retry can cure).
    ///
    /// Transient failures never reach this method: the request stays pending and is retried.
    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?)

    /// A connection ended: `error` is nil after ``CentralManager/cancelPeripheralConnection(_:)``,
    /// a ``BluetoothError`` with code `peripheralDisconnected` when the link was lost.
    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)

    /// A connection ended, with Core Bluetooth's (iOS 17) extra details: when it ended
    /// (`timestamp`, seconds since the reference date) and whether the manager is reconnecting
    /// by itself (the connection was requested with ``CBConnectPeripheralOptionEnableAutoReconnect``;
    /// ``centralManager(_:didConnect:)`` follows when the link is back).
    ///
    /// The manager always calls this method; its default implementation calls
    /// ``centralManager(_:didDisconnectPeripheral:error:)``, so implement one or the other.
    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: Double,
        isReconnecting: Bool, error: (any Error)?)

    /// The manager was created with a restore identifier that has saved state: this is the
    /// first delegate call, before ``centralManagerDidUpdateState(_:)``.
    ///
    /// `dict` holds Core Bluetooth's keys: ``CBCentralManagerRestoredStatePeripheralsKey``
    /// (`[Peripheral]`, with the services, characteristics and notify state discovered before),
    /// ``CBCentralManagerRestoredStateScanServicesKey`` (`[BluetoothUUID]`) and
    /// ``CBCentralManagerRestoredStateScanOptionsKey`` (`[String: Any]`) when a scan was running.
    /// The manager then resumes the connections, subscriptions and scan on its own.
    func centralManager(_ central: CentralManager, willRestoreState dict: [String: Any])
}

extension CentralManagerDelegate {
    /// Does nothing.
    public func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {}

    /// Does nothing.
    public func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {}

    /// Does nothing.
    public func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?)
    {}

    /// Does nothing.
    public func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {}

    /// Does nothing.
    public func centralManager(_ central: CentralManager, willRestoreState dict: [String: Any]) {}

    /// Calls ``centralManager(_:didDisconnectPeripheral:error:)``.
    public func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: Double,
        isReconnecting: Bool, error: (any Error)?
    ) {
        centralManager(central, didDisconnectPeripheral: peripheral, error: error)
    }
}
