internal import DBus

/// `org.bluez.AdvertisementMonitorManager1` on each adapter, served only with
/// ``SimulatedBlueZ/Options/advertisementMonitor`` (bluetoothd's `--experimental`), as
/// `src/adv_monitor.c` handles it with software (kernel) pattern matching.
extension SimulatorCore {
    static let monitorManagerInterface = "org.bluez.AdvertisementMonitorManager1"
    static let monitorInterface: InterfaceName = "org.bluez.AdvertisementMonitor1"

    /// One registered monitor root (`struct adv_monitor_app`) and its monitors.
    struct MonitorApp: Sendable {
        let adapter: String
        let owner: String
        let root: ObjectPath
        /// The monitors bluetoothd accepted and activated, in path order (empty while it reads them).
        var monitors: [SimulatedAdvertisementMonitor] = []
    }

    func monitorManagerProperties() -> [String: DBusValue] {
        ["SupportedMonitorTypes": .stringArray(["or_patterns"]), "SupportedFeatures": .stringArray([])]
    }

    func handleMonitorManagerCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, _ arguments: [DBusValue]
    ) {
        guard let (adapter, sender, root) = registrationCall(invocation, path, arguments) else { return }
        let index = monitorApps.firstIndex { $0.adapter == adapter.name && $0.owner == sender && $0.root == root }
        switch member {
        case "RegisterMonitor":
            guard index == nil else { return reply(invocation, error: BlueZErrors.alreadyExists) }
            guard let connection, let owner = try? BusName(sender) else {
                return reply(invocation, error: BlueZErrors.failed("Failed to register monitor"))
            }
            monitorApps.append(MonitorApp(adapter: adapter.name, owner: sender, root: root))
            // bluetoothd answers at once and reads the monitors through its object-manager client.
            reply(invocation)
            readMonitors(adapter: adapter.name, owner: owner, root: root, on: connection)
        case "UnregisterMonitor":
            guard let index else { return reply(invocation, error: BlueZErrors.doesNotExist) }
            let app = monitorApps.remove(at: index)
            for monitor in app.monitors { sendMonitorCall("Release", to: monitor, app: app) }
            reply(invocation)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }

    /// `GetManagedObjects` on the root; each valid `AdvertisementMonitor1` below it is activated,
    /// each invalid one released (`monitor_proxy_added_cb`).
    private func readMonitors(adapter: String, owner: BusName, root: ObjectPath, on connection: DBusConnection) {
        let epoch = self.epoch
        Task {
            let reply = try? await connection.call(
                destination: owner, path: root, interface: .objectManager, member: "GetManagedObjects")
            self.perform(ifEpoch: epoch) {
                guard
                    let index = self.monitorApps.firstIndex(where: {
                        $0.adapter == adapter && $0.owner == owner.rawValue && $0.root == root
                    })
                else { return }
                for entry in reply?.first?.dictionaryEntries ?? [] {
                    guard let path = entry.key.objectPathValue, path.rawValue.hasPrefix(root.rawValue),
                        let properties = entry.value.dictionaryEntries?.first(where: {
                            $0.key.stringValue == Self.monitorInterface.rawValue
                        })?.value.stringKeyedDictionary
                    else { continue }
                    let app = self.monitorApps[index]
                    guard
                        let monitor = SimulatedAdvertisementMonitor.parse(
                            properties, owner: owner.rawValue, path: path.rawValue)
                    else {
                        self.releasedMonitors[adapter, default: []].append(path.rawValue)
                        self.sendMonitorCall("Release", toPath: path, owner: app.owner)
                        continue
                    }
                    self.monitorApps[index].monitors.append(monitor)
                    self.sendMonitorCall("Activate", to: monitor, app: app)
                }
                // Peripherals already in range are matched against the new monitors.
                for peripheral in self.air[adapter] ?? [] where peripheral.isInRange { self.report(peripheral) }
            }
        }
    }

    /// The active monitors of `adapter` whose patterns match `peripheral`'s advertisement.
    func matchingMonitors(_ peripheral: SimulatedPeripheral, adapter: String) -> [SimulatedAdvertisementMonitor] {
        let apps = monitorApps.filter { $0.adapter == adapter && !$0.monitors.isEmpty }
        guard !apps.isEmpty else { return [] }
        let structures = AdvertisementStructures(peripheral.advertisement.withLock { $0 })
        return apps.flatMap(\.monitors).filter { $0.matches(structures) }
    }

    /// `DeviceFound` on each monitor, as bluetoothd does for every matching advertisement when
    /// the monitor sets no RSSI thresholds (`adv_monitor_filter_rssi`).
    func monitorsFound(_ monitors: [SimulatedAdvertisementMonitor], device path: ObjectPath) {
        for monitor in monitors {
            sendMonitorCall("DeviceFound", toPath: monitor.objectPath, owner: monitor.owner, [.objectPath(path)])
        }
    }

    /// Drops the monitors of a client that left the bus (`app_disconnect_cb`).
    func monitorOwnerLeft(_ owner: String) {
        monitorApps.removeAll { $0.owner == owner }
    }

    /// The monitors registered and active on `adapter`, oldest first.
    func registeredMonitors(adapter: String) -> [SimulatedAdvertisementMonitor] {
        run { monitorApps.filter { $0.adapter == adapter }.flatMap(\.monitors) }
    }

    /// The monitors bluetoothd has called `Release` on, in order.
    func releasedMonitorPaths(adapter: String) -> [String] {
        run { releasedMonitors[adapter] ?? [] }
    }

    private func sendMonitorCall(_ member: String, to monitor: SimulatedAdvertisementMonitor, app: MonitorApp) {
        if member == "Release" { releasedMonitors[app.adapter, default: []].append(monitor.path) }
        sendMonitorCall(member, toPath: monitor.objectPath, owner: app.owner)
    }

    /// Calls `member` on a monitor without waiting for the reply (bluetoothd's `[noreply]` calls).
    private func sendMonitorCall(
        _ member: String, toPath path: ObjectPath, owner: String, _ arguments: [DBusValue] = []
    ) {
        guard let connection, let destination = try? BusName(owner), let name = try? MemberName(member),
            let message = try? DBusMessage.methodCall(
                destination: destination, path: path, interface: Self.monitorInterface, member: name,
                arguments: arguments)
        else { return }
        // gdbus sends the signals it holds first: the device's `InterfacesAdded` precedes `DeviceFound`.
        flushSignals(beforeReply: true)
        connection.send(message)
    }
}

/// The AD structures an advertisement of a simulated peripheral carries, by type.
struct AdvertisementStructures {
    var fields: [(type: UInt8, data: [UInt8])] = []

    init(_ ad: SimulatedPeripheral.Advertisement) {
        if ad.flags != 0 { fields.append((0x01, [ad.flags])) }
        let uuids = ad.serviceUUIDs.compactMap(BluetoothText.uuid)
        let short = uuids.compactMap(Self.shortBytes)
        if !short.isEmpty { fields.append((0x03, short.flatMap { $0 })) }
        let long = uuids.filter { Self.shortBytes($0) == nil }.compactMap(Self.longBytes)
        if !long.isEmpty { fields.append((0x07, long.flatMap { $0 })) }
        if let name = ad.name { fields.append((0x09, Array(name.utf8))) }
        if let txPower = ad.txPower { fields.append((0x0A, [UInt8(bitPattern: Int8(clamping: txPower))])) }
        for (key, bytes) in ad.serviceData.sorted(by: { $0.key < $1.key }) {
            guard let uuid = BluetoothText.uuid(key) else { continue }
            if let short = Self.shortBytes(uuid) {
                fields.append((0x16, short + bytes))
            } else if let long = Self.longBytes(uuid) {
                fields.append((0x21, long + bytes))
            }
        }
        if let appearance = ad.appearance { fields.append((0x19, [UInt8(appearance & 0xFF), UInt8(appearance >> 8)])) }
        for (company, bytes) in ad.manufacturerData.sorted(by: { $0.key < $1.key }) {
            fields.append((0xFF, [UInt8(company & 0xFF), UInt8(company >> 8)] + bytes))
        }
    }

    /// A 16-bit UUID's two little-endian bytes; nil for one outside the Bluetooth base.
    static func shortBytes(_ uuid: String) -> [UInt8]? {
        let lowered = uuid.lowercased()
        guard lowered.hasPrefix("0000"), lowered.hasSuffix("-0000-1000-8000-00805f9b34fb"),
            let value = UInt16(lowered.dropFirst(4).prefix(4), radix: 16)
        else { return nil }
        return [UInt8(value & 0xFF), UInt8(value >> 8)]
    }

    /// A 128-bit UUID's sixteen little-endian bytes.
    static func longBytes(_ uuid: String) -> [UInt8]? {
        let hex = uuid.filter { $0 != "-" }
        guard hex.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes.reversed()
    }
}
