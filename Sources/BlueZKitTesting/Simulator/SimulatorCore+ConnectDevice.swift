internal import DBus

/// `Adapter1.ConnectDevice`, bluetoothd's experimental connect by address (`src/adapter.c`).
extension SimulatorCore {
    /// As bluetoothd: absent without `--experimental` (``SimulatedBlueZ/Options/experimental``:
    /// gdbus answers `UnknownMethod`); `NotReady` on an adapter that is off; `InvalidArguments`
    /// for a key other than `Address` and `AddressType`, a value that is not a string, an
    /// address that is not one or a type other than `public` and `random`; on 5.66 (until 5.68)
    /// `AlreadyExists` for a device the adapter has. Then the kernel connects (no discovery
    /// first): when the peripheral is in range and connectable after the connection time, the
    /// device object is made (if new) and connected, and the reply carries its path; otherwise,
    /// after the connect timeout, the reply is the error `org.bluez.Failed` (sic: bluetoothd's
    /// `device_connect_cb` names no `Error.`) and no device object is made. The address type
    /// must be the peripheral's: a BR/EDR connect (no `AddressType`) reaches no LE peripheral.
    /// A peripheral that comes into range during the wait is not connected.
    func connectDeviceCall(_ invocation: DBusMethodInvocation, _ adapter: AdapterState, _ arguments: [DBusValue]) {
        guard options.experimental else {
            return reply(
                invocation,
                error: BlueZErrors.unknownMethod(
                    member: "ConnectDevice", signature: "a{sv}", interface: Self.adapterInterface))
        }
        guard adapter.powered else { return reply(invocation, error: BlueZErrors.notReady) }
        guard let (address, type) = Self.connectDeviceTarget(arguments.first) else {
            return reply(invocation, error: BlueZErrors.invalidArguments())
        }
        let path = Self.devicePath(adapter: adapter.name, address: address)
        if options.version == .bluez5_66, devices[path] != nil {
            return reply(invocation, error: BlueZErrors.alreadyExists)
        }
        let name = adapter.name
        after(options.timing.connection) {
            guard self.adapters[name]?.powered == true, let type,
                let peripheral = self.peripheral(adapter: name, address: address),
                peripheral.addressType == type, peripheral.isInRange, peripheral.isConnectable,
                self.devices[path]?.isConnecting != true
            else {
                return self.after(self.options.timing.connectTimeout) {
                    self.reply(invocation, error: DBusError(name: "org.bluez.Failed", message: ""))
                }
            }
            if self.devices[path] == nil {
                self.devices[path] = DeviceState(
                    path: path, adapterName: name, address: address, addressType: peripheral.addressType)
                self.interfacesAdded(path, [Self.deviceInterface])
            }
            if self.devices[path]?.connected != true { self.establish(path, peripheral: peripheral) }
            self.reply(invocation, [.objectPath(path)])
        }
    }

    /// The address (upper case) and type (nil: BR/EDR) a `ConnectDevice` dictionary names; nil
    /// when bluetoothd would answer `InvalidArguments`.
    static func connectDeviceTarget(_ argument: DBusValue?) -> (String, SimulatedAddressType?)? {
        guard let entries = argument?.stringKeyedDictionary else { return nil }
        var address: String?
        var type: SimulatedAddressType?
        for (key, value) in entries {
            guard let text = value.stringValue else { return nil }
            switch key {
            case "Address":
                guard let parsed = BluetoothText.address(text) else { return nil }
                address = parsed
            case "AddressType":
                guard let parsed = SimulatedAddressType(rawValue: text) else { return nil }
                type = parsed
            default: return nil
            }
        }
        guard let address, address != "00:00:00:00:00:00" else { return nil }
        return (address, type)
    }
}
