import DBus

/// The battery levels bluetoothd reads from connected devices (`org.bluez.Battery1`).
///
/// bluetoothd's battery plugin (profiles/battery/battery.c, the same in 5.66, 5.82 and 5.87)
/// works on a connected LE device whose GATT database has the Battery service (`180F`): it reads
/// Battery Level (`2A19`), enables its notifications and, once the peripheral accepted that
/// write, exports `Battery1` on the device's object (`Percentage`, `y`, 0 to 100: src/battery.c
/// refuses larger values). Each notification updates `Percentage`; the interface goes when the
/// link ends. A Battery Level that cannot be read or does not notify gives no `Battery1`.
extension BlueZClient {
    /// The device's battery level in percent as bluetoothd reports it (`Battery1.Percentage`), or
    /// nil when bluetoothd has none for it (on the queue). A value outside 0...100 counts as none.
    package func batteryPercentage(_ id: DeviceID) -> Int? {
        guard let percentage = cache.properties(BlueZNames.battery, at: id.path)?["Percentage"]?.byteValue,
            percentage <= 100
        else { return nil }
        return Int(percentage)
    }

    /// Reports `batteryChanged` for each device of our adapter whose ``batteryPercentage(_:)``
    /// `event` changed (on the queue, for each cache event, before the device events it brings,
    /// so that a device's last level is reported before the device goes).
    func trackBatteries(_ event: BlueZObjectCache.Event) {
        let battery = BlueZNames.battery.rawValue
        let affected: Set<DeviceID>
        switch event {
        case .loaded, .vanished:
            affected = Set(batteryLevels.keys).union(cache.paths(with: BlueZNames.battery).map(DeviceID.init(path:)))
        case .interfacesAdded(let path, let interfaces) where interfaces[battery] != nil:
            affected = [DeviceID(path: path)]
        case .interfacesRemoved(let path, let names)
        where names.contains(battery) || names.contains(BlueZNames.device.rawValue):
            affected = [DeviceID(path: path)]
        case .propertiesChanged(let path, let interface, _, _) where interface == battery:
            affected = [DeviceID(path: path)]
        default:
            return
        }
        for id in affected.sorted(by: { $0.path < $1.path }) {
            let level = device(at: id.path)?.adapter == adapterPath ? batteryPercentage(id) : nil
            guard level != batteryLevels[id] else { continue }
            batteryLevels[id] = level
            events(.batteryChanged(id, percentage: level))
        }
    }
}
