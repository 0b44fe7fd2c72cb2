public import Foundation

/// The methods a central manager calls to report its state and its discoveries.
///
/// Every method is called on the manager's `queue` (the main queue when it
/// was created with nil), in the order the events happened. All but
/// ``centralManagerDidUpdateState(_:)`` have default implementations.
///
/// Where Core Bluetooth's signature uses types that are not `Sendable`
/// (`[String: Any]` advertisement data, an `NSNumber` RSSI), there are two
/// methods for the event: Core Bluetooth's, which the manager calls, and a typed
/// Linux one (``AdvertisementData``, `Int`). The default implementation of Core
/// Bluetooth's method converts its arguments and calls the typed one, whose
/// default does nothing. Implement either: the manager calls your method once
/// per event, never both (if you implement both, Core Bluetooth's is called and
/// decides whether to call the other).
///
/// A method whose signature differs from every requirement by a label or a type
/// is an ordinary method that is never called. The compiler warns about such a
/// near miss only when the method is declared in an extension that declares the
/// conformance (`extension App: CBCentralManagerDelegate { … }`); see
/// <doc:CoreBluetoothDifferences>.
public protocol CentralManagerDelegate: AnyObject {
    /// The manager's ``CentralManager/state`` changed; read it to see the new value.
    ///
    /// The first call follows creation once the library has talked to
    /// bluetoothd (or found it missing). Scanning is possible in `.poweredOn` only.
    func centralManagerDidUpdateState(_ central: CentralManager)

    /// A scan saw an advertisement from `peripheral`: Core Bluetooth's signature, the one the
    /// manager calls.
    ///
    /// `advertisementData` holds Core Bluetooth's keys with Apple's value types (`String`,
    /// `Data`, `[CBUUID: Data]`, `[CBUUID]`, `NSNumber` for the transmit power and
    /// connectability); `RSSI` is the received signal strength in dBm. Without
    /// `CBCentralManagerScanOptionAllowDuplicatesKey` a peripheral is reported once per scan,
    /// and again only when its advertisement data changes. The default implementation calls
    /// ``centralManager(_:didDiscover:advertisementData:rssi:)-(_,_,AdvertisementData,_)``.
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber)

    /// A scan saw an advertisement from `peripheral`, typed: the Linux variant of Core
    /// Bluetooth's method, called by that method's default implementation.
    ///
    /// `rssi` is the received signal strength in dBm.
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
    /// otherwise a ``BluetoothError`` whose ``BluetoothError/disconnectReason`` (Linux) says why,
    /// as bluetoothd 5.83 and later report it (``DisconnectReason/notReported`` before), with Core
    /// Bluetooth's code for it: `connectionTimeout` for a supervision timeout,
    /// `peerRemovedPairingInformation` for lost keys, `peripheralDisconnected` otherwise.
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
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: CFAbsoluteTime,
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
    /// Converts the arguments and calls
    /// ``centralManager(_:didDiscover:advertisementData:rssi:)-(_,_,AdvertisementData,_)``.
    public func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) {
        let typed = (try? AdvertisementData(dictionary: advertisementData)) ?? AdvertisementData()
        centralManager(central, didDiscover: peripheral, advertisementData: typed, rssi: RSSI.intValue)
    }

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
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: CFAbsoluteTime,
        isReconnecting: Bool, error: (any Error)?
    ) {
        centralManager(central, didDisconnectPeripheral: peripheral, error: error)
    }
}
