/// The battery level bluetoothd reads from a connected peripheral, which Core Bluetooth leaves to
/// the app.
extension Peripheral {
    /// Linux: the peripheral's battery level in percent (0 to 100) as bluetoothd last read it
    /// (`org.bluez.Battery1.Percentage`), or nil when bluetoothd has none for it.
    ///
    /// bluetoothd's battery plugin reads it by itself from a connected peripheral whose GATT
    /// database has the Battery service (`180F`) with a Battery Level (`2A19`) that can be read
    /// and notifies: after the link's service discovery it reads the level, enables its
    /// notifications, then publishes it; every notification updates it. It is nil before that,
    /// for a peripheral whose level cannot be read or does not notify, and again once the link
    /// ended. Each change calls ``PeripheralDelegate/peripheral(_:didUpdateBatteryLevel:)``
    /// on the manager's queue, after this property took the new value.
    ///
    /// The Battery service stays among the peripheral's services for ``discoverServices(_:)``;
    /// from bluetoothd 5.80, which counts it as its plugin's, writes to it are refused
    /// (`[GATT] ExportClaimedServices = read-only`, the default). Core Bluetooth has no such
    /// property.
    public var batteryLevel: Int? { mutable.withLock { $0.batteryLevel } }

    /// Sets ``batteryLevel``: where the manager applies a `.batteryLevel` event, on its queue, or
    /// when the engine makes the peripheral.
    func update(batteryLevel: Int?) { mutable.withLock { $0.batteryLevel = batteryLevel } }
}
