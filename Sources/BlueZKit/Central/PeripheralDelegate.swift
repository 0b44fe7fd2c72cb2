public import Foundation

/// The methods a peripheral calls to report discoveries, values and notification state.
///
/// Every method is called on the central manager's `queue`, in order, and has
/// a default implementation. Errors are ``ATTError`` for failures the
/// remote device reported and ``BluetoothError`` for the rest.
///
/// `didReadRSSI` has Core Bluetooth's signature (`NSNumber`), which the manager
/// calls, and a typed Linux one (`Int`) that its default implementation calls:
/// implement either (see ``CentralManagerDelegate`` for the rule).
public protocol PeripheralDelegate: AnyObject {
    /// ``Peripheral/discoverServices(_:)`` finished; read ``Peripheral/services``.
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?)
    /// ``Peripheral/discoverIncludedServices(_:for:)`` finished.
    func peripheral(_ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?)
    /// ``Peripheral/discoverCharacteristics(_:for:)`` finished; read ``Service/characteristics``.
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?)
    /// ``Peripheral/discoverDescriptors(for:)`` finished; read ``Characteristic/descriptors``.
    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?)
    /// A read finished or a notification arrived; read ``Characteristic/value``.
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
    /// A descriptor read finished; read ``Descriptor/value``.
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?)
    /// A write with response finished.
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?)
    /// A descriptor write finished.
    func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?)
    /// ``Peripheral/setNotifyValue(_:for:)`` finished; read ``Characteristic/isNotifying``.
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?)
    /// ``Peripheral/readRSSI()`` finished with the last RSSI in dBm: Core Bluetooth's
    /// signature, the one the manager calls.
    ///
    /// The default implementation calls ``peripheral(_:didReadRSSI:error:)-(_,Int,_)``.
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?)
    /// ``Peripheral/readRSSI()`` finished with the last RSSI in dBm, typed: the Linux variant,
    /// called by the default implementation of Core Bluetooth's method.
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?)
    /// The peripheral's ``Peripheral/name`` changed (BlueZ's `Device1.Name`, from an
    /// advertisement or, once connected, the GAP Device Name; a local alias does not count).
    func peripheralDidUpdateName(_ peripheral: Peripheral)
    /// The peripheral's GATT database changed (it indicated Service Changed): `invalidatedServices`
    /// are gone from ``Peripheral/services``, and so are their characteristics and descriptors —
    /// operations on them fail with ``BluetoothError/Code/invalidHandle`` and their subscriptions
    /// end. Call ``Peripheral/discoverServices(_:)`` to find what replaced them; an empty list means
    /// services were only added.
    ///
    /// Called on the manager's queue once per change, after the app discovered services on the
    /// link. bluetoothd reports the change as `InterfacesRemoved` and `InterfacesAdded` of the
    /// `GattService1`, `GattCharacteristic1` and `GattDescriptor1` objects under the device, with
    /// `ServicesResolved` staying true; a burst of them makes one call.
    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service])
    /// ``Peripheral/canSendWriteWithoutResponse`` became true again: writes without response
    /// that had to wait have gone out, and new ones go out at once.
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral)
    /// ``Peripheral/openL2CAPChannel(_:)`` finished: the open channel, or the error (see
    /// Peripheral+L2CAP.swift).
    func peripheral(_ peripheral: Peripheral, didOpen channel: L2CAPChannel?, error: (any Error)?)
    /// Linux: the peripheral's ``Peripheral/batteryLevel`` changed — bluetoothd read its Battery
    /// Level or was notified of a new one — or is unknown again (nil, once the link ended).
    ///
    /// Called on the manager's queue, after ``Peripheral/batteryLevel`` took the new value. Core
    /// Bluetooth has no such call (an iOS app reads Battery Level `2A19` itself).
    func peripheral(_ peripheral: Peripheral, didUpdateBatteryLevel level: Int?)
}

extension PeripheralDelegate {
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?) {}
    /// Does nothing.
    public func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {}
    /// Calls ``peripheral(_:didReadRSSI:error:)-(_,Int,_)`` with the RSSI as an `Int`.
    public func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?) {
        self.peripheral(peripheral, didReadRSSI: RSSI.intValue, error: error)
    }
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {}
    /// Does nothing.
    public func peripheralDidUpdateName(_ peripheral: Peripheral) {}
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {}
    /// Does nothing.
    public func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {}
    /// Does nothing.
    public func peripheral(_ peripheral: Peripheral, didUpdateBatteryLevel level: Int?) {}
}
