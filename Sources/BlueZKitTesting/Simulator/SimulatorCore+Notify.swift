internal import DBus

/// Notification sessions (`StartNotify` / `StopNotify`), the peripheral's CCCD, and notifications.
extension SimulatorCore {
    static let characteristicInterface = "org.bluez.GattCharacteristic1"

    /// `StartNotify`: one session per client; the first one writes the CCCD and turns `Notifying` true.
    /// While disconnected the session is kept and registered on the next connection, as bluetoothd does.
    /// Refused while the notifications are acquired.
    func startNotify(
        _ invocation: DBusMethodInvocation, _ characteristic: GATTNode.Characteristic, sender: String, connected: Bool
    ) {
        if characteristic.notifyIO != nil {
            return reply(invocation, error: BlueZErrors.notPermitted("Notify acquired"))
        }
        guard characteristic.flags.canNotify else { return reply(invocation, error: BlueZErrors.notSupported) }
        if characteristic.notifyClients.contains(sender) { return reply(invocation) }
        updateCharacteristic(characteristic.path) { $0.notifyClients.append(sender) }
        if connected { enableNotifications(characteristic.path) }
        reply(invocation)
    }

    /// Ends `owner`'s session; the last one writes the CCCD off and turns `Notifying` false.
    func removeNotifySession(_ path: ObjectPath, owner: String) {
        guard case .characteristic(let characteristic) = gattObjects[path] else { return }
        updateCharacteristic(path) { $0.notifyClients.removeAll { $0 == owner } }
        guard characteristic.notifyClients == [owner] else { return }
        if !batteryHolds(characteristic.device, handle: characteristic.valueHandle) {
            updateDevice(characteristic.device) { $0.clientConfigurations[characteristic.valueHandle] = nil }
        }
        if characteristic.notifying {
            updateCharacteristic(path) { $0.notifying = false }
            propertiesChanged(path, Self.characteristicInterface, ["Notifying"])
        }
    }

    /// Registers every kept session again after a (re)connection (an acquisition's is not kept:
    /// it is not among bluetoothd's `all_notify_clients`), and answers the acquisitions that waited.
    func resubscribe(_ device: ObjectPath) {
        for path in devices[device]?.gattPaths ?? [] {
            guard case .characteristic(let characteristic) = gattObjects[path], !characteristic.notifyClients.isEmpty,
                characteristic.notifyIO == nil
            else {
                continue
            }
            enableNotifications(path)
        }
        answerWaitingAcquisitions(device)
    }

    private func enableNotifications(_ path: ObjectPath) {
        guard case .characteristic(let characteristic) = gattObjects[path] else { return }
        writeClientConfiguration(path)
        if !characteristic.notifying {
            updateCharacteristic(path) { $0.notifying = true }
            propertiesChanged(path, Self.characteristicInterface, ["Notifying"])
        }
    }

    /// The central writes the peripheral's CCCD on: notifications when the characteristic has them, else indications.
    func writeClientConfiguration(_ path: ObjectPath) {
        guard case .characteristic(let characteristic) = gattObjects[path] else { return }
        let value: UInt16 = characteristic.flags.properties & AttributeFlags.notify != 0 ? 0x0001 : 0x0002
        updateDevice(characteristic.device) { $0.clientConfigurations[characteristic.valueHandle] = value }
    }

    func updateCharacteristic(_ path: ObjectPath, _ body: (inout GATTNode.Characteristic) -> Void) {
        guard case .characteristic(var characteristic) = gattObjects[path] else { return }
        body(&characteristic)
        gattObjects[path] = .characteristic(characteristic)
    }

    // MARK: Peripheral side

    /// The peripheral notifies `value` on the characteristic whose value handle is `handle`.
    ///
    /// Delivered only while connected with the CCCD on; bluetoothd then stores the value
    /// and emits `PropertiesChanged` on `Value` at once (one signal per notification) — unless the
    /// notifications are acquired: then the value goes to the socket instead, cache untouched.
    /// True when it reached bluetoothd, even if the acquired socket then dropped it.
    func notify(_ peripheral: SimulatedPeripheral, handle: UInt16, value: [UInt8]) -> Bool {
        run {
            guard let device = devicePath(of: peripheral), let state = devices[device], state.connected,
                (state.clientConfigurations[handle] ?? 0) != 0
            else { return false }
            batteryLevelNotified(device, handle: handle, value: value)
            for path in state.gattPaths {
                guard case .characteristic(var characteristic) = gattObjects[path], characteristic.valueHandle == handle
                else {
                    continue
                }
                if let io = characteristic.notifyIO {
                    sendNotification(value, to: io)
                    return true
                }
                // Only for a D-Bus client's session: bluetoothd's battery plugin subscribes by itself.
                guard characteristic.notifying else { return true }
                characteristic.cachedValue = value
                gattObjects[path] = .characteristic(characteristic)
                propertiesChanged(path, Self.characteristicInterface, ["Value"], flushNow: true)
                return true
            }
            return batteryHolds(device, handle: handle)
        }
    }

    /// Whether the central enabled notifications or indications for the value handle `handle`.
    func isSubscribed(_ peripheral: SimulatedPeripheral, handle: UInt16) -> Bool {
        run {
            guard let device = devicePath(of: peripheral), let state = devices[device], state.connected else {
                return false
            }
            return (state.clientConfigurations[handle] ?? 0) != 0
        }
    }
}
