internal import DBus

/// What virtual centrals need from bluetoothd: the registered attribute they address, and the
/// per-characteristic notification count (`ntfy_cnt` of `struct external_chrc`).
extension SimulatorCore {
    /// The registered characteristic a central addresses, with the connection to reach its application.
    struct CentralTarget: Sendable {
        let connection: DBusConnection
        let owner: BusName
        let characteristic: SimulatedGATTApplication.Characteristic

        var path: ObjectPath { (try? ObjectPath(characteristic.path)) ?? .root }
        var key: String { owner.rawValue + " " + characteristic.path }

        func has(anyOf flags: Set<String>) -> Bool { characteristic.flags.contains { flags.contains($0) } }

        /// `conf_cb`: an indication was confirmed (or failed with its link), and bluetoothd calls
        /// the application's `Confirm()` without waiting for a reply.
        func confirm() {
            guard
                let message = try? DBusMessage.methodCall(
                    destination: owner, path: path, interface: "org.bluez.GattCharacteristic1", member: "Confirm")
            else { return }
            connection.send(message)
        }
    }

    /// The first registered characteristic with these UUIDs on `adapter`; nil when there is none.
    func centralTarget(adapter: String, serviceUUID: String, characteristicUUID: String) -> CentralTarget? {
        run {
            guard let connection, adapters[adapter] != nil else { return nil }
            for registration in applications where registration.adapter == adapter {
                guard let application = registration.application,
                    let characteristic = application.characteristic(
                        serviceUUID: serviceUUID, characteristicUUID: characteristicUUID),
                    let owner = try? BusName(application.owner)
                else { continue }
                return CentralTarget(connection: connection, owner: owner, characteristic: characteristic)
            }
            return nil
        }
    }

    /// A central connects to `adapter`: bluetoothd creates its `Device1` (or reuses the one it has) and
    /// marks it connected. False when the adapter is absent or powered off.
    func centralConnected(adapter: String, address: String, mtu: UInt16) -> Bool {
        run {
            guard adapters[adapter]?.powered == true else { return false }
            let path = Self.devicePath(adapter: adapter, address: address)
            if devices[path] == nil {
                devices[path] = DeviceState(path: path, adapterName: adapter, address: address, addressType: .public)
                interfacesAdded(path, [Self.deviceInterface])
            }
            guard devices[path]?.connected == false else { return true }
            let generation = makeAttemptID()
            updateDevice(path) { device in
                device.connected = true
                device.mtu = mtu
                device.link = .connected(generation: generation)
            }
            propertiesChanged(path, Self.deviceInterface, ["Connected"])
            return true
        }
    }

    /// The central drops the link: `Connected` turns false (the device stays, as bluetoothd keeps it a while).
    func centralDisconnected(adapter: String, address: String) {
        run { linkLost(Self.devicePath(adapter: adapter, address: address), .remote) }
    }

    /// The central at `address` pairs and bonds (`Paired` and `Bonded` turn true, the bond is
    /// stored). False when it has no `Device1` on `adapter`.
    func bondCentral(adapter: String, address: String) -> Bool {
        run {
            let path = Self.devicePath(adapter: adapter, address: address)
            guard devices[path] != nil else { return false }
            markPaired(path)
            return true
        }
    }

    /// Whether the `Device1` of the central at `address` is bonded.
    func isCentralBonded(adapter: String, address: String) -> Bool {
        run { devices[Self.devicePath(adapter: adapter, address: address)]?.bonded ?? false }
    }

    /// Whether the `Device1` of the central at `address` is connected.
    func isCentralConnected(adapter: String, address: String) -> Bool {
        run { devices[Self.devicePath(adapter: adapter, address: address)]?.connected ?? false }
    }

    /// Counts one more (`delta` 1) or one fewer (-1) subscribed central; returns the new count.
    func changeNotifyCount(_ key: String, by delta: Int) -> Int {
        run {
            let count = max(0, (applicationNotifyCounts[key] ?? 0) + delta)
            applicationNotifyCounts[key] = count == 0 ? nil : count
            return count
        }
    }

    /// `dbus_error_to_att_ecode` (`src/gatt-database.c`): the ATT error an application's D-Bus error becomes.
    ///
    /// - Parameter permissionError: `0x02` for reads, `0x03` for writes (what `NotPermitted` becomes).
    static func attCode(for error: DBusError, permissionError: UInt8) -> UInt8 {
        switch error.name {
        case BlueZErrors.prefix + "Failed":
            guard let code = parseCode(error.message) else { return 0x80 }
            return (0x80...0x9f).contains(code) ? UInt8(code) : 0x0e
        case BlueZErrors.prefix + "NotSupported": return 0x06
        case BlueZErrors.prefix + "NotAuthorized": return 0x08
        case BlueZErrors.prefix + "InvalidValueLength": return 0x0d
        case BlueZErrors.prefix + "InvalidOffset": return 0x07
        case BlueZErrors.prefix + "InProgress": return 0xfe
        case BlueZErrors.prefix + "ImproperlyConfigured": return 0xfd
        case BlueZErrors.prefix + "NotPermitted": return permissionError
        default: return 0x0e
        }
    }

    /// `strtol(message, &end, 0)` that must consume the whole message: decimal, `0x` hex or leading-`0` octal.
    private static func parseCode(_ message: String) -> Int? {
        if message.isEmpty { return 0 }  // strtol stops at once, and the end is the terminator
        var text = Substring(message)
        var sign = 1
        if let first = text.first, first == "-" || first == "+" {
            sign = first == "-" ? -1 : 1
            text = text.dropFirst()
        }
        let radix: Int
        if text.hasPrefix("0x") || text.hasPrefix("0X") {
            radix = 16
            text = text.dropFirst(2)
        } else if text.hasPrefix("0") && text.count > 1 {
            radix = 8
        } else {
            radix = 10
        }
        guard !text.isEmpty, let value = Int(text, radix: radix) else { return nil }
        return sign * value
    }
}
