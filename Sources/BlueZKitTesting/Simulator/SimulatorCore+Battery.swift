internal import DBus

/// bluetoothd's battery plugin (profiles/battery/battery.c and src/battery.c, the same in 5.66,
/// 5.82 and 5.87): `org.bluez.Battery1` on a connected device with the Battery service.
///
/// Once the link's services are resolved, the plugin reads Battery Level (`2A19`) of the first
/// Battery service (`180F`), then registers for its notifications (writing the CCCD, as a
/// `StartNotify` would, but with no D-Bus client: the characteristic's `Notifying` and `Value`
/// are untouched); when the peripheral accepted that, it exports `Battery1` with `Percentage`,
/// the first byte read (absent when over 100). A read that fails, an empty value, or a Battery
/// Level without notifications leave the device without `Battery1`. Each notification updates
/// `Percentage` (a value over 100 is ignored); the interface goes when the link ends.
extension SimulatorCore {
    static let batteryInterface = "org.bluez.Battery1"
    static let batteryServiceUUID = "0000180f" + BluetoothText.baseSuffix
    static let batteryLevelUUID = "00002a19" + BluetoothText.baseSuffix

    /// Starts the plugin's work on a link whose services were just resolved (on the queue).
    func probeBattery(_ path: ObjectPath, layout: GATTLayout, generation: Int) {
        guard let service = layout.services.first(where: { $0.uuid == Self.batteryServiceUUID }),
            let level = service.characteristics.first(where: { $0.uuid == Self.batteryLevelUUID })
        else { return }
        // The read's and the CCCD write's round trips: after the turn that resolved the services.
        after(.zero) {
            guard let device = self.devices[path], device.link == .connected(generation: generation),
                !device.batteryExported
            else { return }
            let read = self.serveRead(
                level.object.readHandler, level.object.storage, level.flags, 0, device: device)
            guard case .success(let bytes) = read, let first = bytes.first, level.flags.canNotify,
                level.descriptors.contains(where: { $0.kind == .clientConfiguration }),
                self.devices[path]?.link == .connected(generation: generation)
            else { return }
            let configuration: UInt16 = level.flags.properties & AttributeFlags.notify != 0 ? 0x0001 : 0x0002
            self.updateDevice(path) { device in
                device.clientConfigurations[level.valueHandle] = configuration
                device.batteryLevelHandle = level.valueHandle
                device.batteryExported = true
                device.batteryPercentage = first <= 100 ? first : nil
            }
            self.interfacesAdded(path, [Self.batteryInterface])
        }
    }

    /// A notification of `handle` reached bluetoothd: the plugin's, when it is its Battery Level
    /// (on the queue).
    func batteryLevelNotified(_ path: ObjectPath, handle: UInt16, value: [UInt8]) {
        guard let device = devices[path], device.batteryExported, device.batteryLevelHandle == handle,
            let first = value.first, first <= 100, first != device.batteryPercentage
        else { return }
        updateDevice(path) { $0.batteryPercentage = first }
        propertiesChanged(path, Self.batteryInterface, ["Percentage"])
    }

    /// Whether the plugin holds the CCCD of `handle` on (so a D-Bus client's last `StopNotify`
    /// leaves it on).
    func batteryHolds(_ path: ObjectPath, handle: UInt16) -> Bool {
        devices[path]?.batteryLevelHandle == handle
    }

    /// The link ended: the plugin unregisters the battery (`batt_disconnect`; on the queue).
    func removeBattery(_ path: ObjectPath) {
        guard let device = devices[path], device.batteryLevelHandle != nil else { return }
        if device.batteryExported { interfacesRemoved(path, [Self.batteryInterface]) }
        updateDevice(path) { device in
            device.batteryLevelHandle = nil
            device.batteryExported = false
            device.batteryPercentage = nil
        }
    }

    /// `Battery1`'s properties.
    func batteryProperties(_ device: DeviceState) -> [String: DBusValue] {
        device.batteryPercentage.map { ["Percentage": .byte($0)] } ?? [:]
    }
}
