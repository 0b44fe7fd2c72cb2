import BlueZKitTesting
import DBus
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct FaultTests {
    static let path = HeartRateSensor.path

    @Test func injectedErrorsWearOffAfterTheirCount() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try rig.bluez.addPeripheral(HeartRateSensor().peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        rig.bluez.inject(
            .error(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), for: .connect, count: 2)
        for _ in 0..<2 {
            let error = await rig.client.error(Self.path, deviceInterface, "Connect")
            #expect(error?.name == "org.bluez.Error.Failed")
            #expect(error?.message == "le-connection-abort-by-local")
        }
        #expect(await rig.client.error(Self.path, deviceInterface, "Connect") == nil)
    }

    @Test func faultsCanTargetOnePath() async throws {
        let rig = try await Rig.start(adapters: [.default, .default])
        defer { rig.stop() }
        rig.bluez.inject(
            .error(name: "org.bluez.Error.NotReady", message: "Resource Not Ready"), for: .startDiscovery,
            path: "/org/bluez/hci1")
        #expect(await rig.client.error(adapterPath, adapterInterface, "StartDiscovery") == nil)
        let error = await rig.client.error("/org/bluez/hci1", adapterInterface, "StartDiscovery")
        #expect(error?.name == "org.bluez.Error.NotReady")
    }

    @Test func anInjectedDelayDelaysTheWork() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        rig.bluez.inject(.delay(.milliseconds(300)), for: .getManagedObjects)
        let clock = ContinuousClock()
        let start = clock.now
        let objects = try await rig.client.managedObjects()
        #expect(clock.now - start >= .milliseconds(300))
        #expect(objects[adapterPath] != nil)
    }

    @Test func noReplyLeavesTheCallerToItsTimeout() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        rig.bluez.inject(.noReply, for: .startDiscovery)
        let error = await rig.client.error(adapterPath, adapterInterface, "StartDiscovery", timeout: .milliseconds(200))
        #expect(error?.code == .timeout)
        #expect(rig.bluez.adapters[0].discoverySessionCount == 0)
    }

    @Test func aDeviceVanishingMidConnectLeavesTheConnectUnanswered() async throws {
        let timing = SimulatedBlueZ.Timing(
            connection: .zero, serviceDiscovery: .zero, connectTimeout: .seconds(20), disconnect: .zero, pairing: .zero)
        let rig = try await Rig.start(options: .init(timing: timing))
        defer { rig.stop() }
        let sensor = HeartRateSensor()
        try rig.bluez.addPeripheral(sensor.peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        sensor.peripheral.setInRange(false)
        let client = rig.client
        let connect = Task { await client.error(Self.path, deviceInterface, "Connect", timeout: .milliseconds(500)) }
        try await waitUntil("connecting") { rig.bluez.isConnecting(to: sensor.peripheral) }
        let mark = rig.client.signals.count
        #expect(rig.bluez.removeDevice(sensor.peripheral))
        let removed = await rig.client.signals.expect(from: mark, "device removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == Self.path
        }
        #expect(removed?.removed == [deviceInterface])
        #expect(await connect.value?.code == .timeout)
        // Still in range of the radio: it comes back with its next advertisement.
        sensor.peripheral.setInRange(true)
        _ = await rig.client.signals.expect(from: mark, "found again") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path
        }
    }

    @Test func aDroppedConnectionTurnsConnectedFalse() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        sensor.peripheral.dropConnection()
        let change = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false))
        }
        #expect(change?.changed["ServicesResolved"] == .bool(false))
        #expect(!sensor.peripheral.isConnected)
        // Going out of range drops the link too.
        try await rig.client.call(Self.path, deviceInterface, "Connect")
        let again = rig.client.signals.count
        sensor.peripheral.setInRange(false)
        _ = await rig.client.signals.expect(from: again, "Connected false again") {
            $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false))
        }
    }

    @Test func poweringOffStopsDiscoveryAndDropsConnections() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let adapter = try #require(rig.bluez.adapter(named: "hci0"))
        let mark = rig.client.signals.count
        adapter.setPowered(false)
        let power = await rig.client.signals.expect(from: mark, "Powered false") {
            $0.changes(adapterPath, adapterInterface, "Powered", to: .bool(false))
        }
        #expect(power?.changed["Discovering"] == .bool(false))
        _ = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false))
        }
        #expect(adapter.discoverySessionCount == 0)
        let notReady = await rig.client.error(adapterPath, adapterInterface, "StopDiscovery")
        #expect(notReady?.name == "org.bluez.Error.NotReady")
        adapter.setPowered(true)
        _ = await rig.client.signals.expect(from: mark, "Powered true") {
            $0.changes(adapterPath, adapterInterface, "Powered", to: .bool(true))
        }
        let lost = await rig.client.error(adapterPath, adapterInterface, "StopDiscovery")
        #expect(lost?.message == "No discovery started")
    }

    @Test func removingAndReAddingAnAdapterBringsBackBondedDevices() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        try await registerPairingAgent(rig)
        try await rig.client.call(Self.path, deviceInterface, "Pair")
        let stranger = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "stranger")
        try rig.bluez.addPeripheral(stranger)
        _ = await rig.client.signals.expect("stranger found") {
            $0.member == "InterfacesAdded" && $0.objectPath == "/org/bluez/hci0/dev_C0_FF_EE_00_00_02"
        }
        let adapter = try #require(rig.bluez.adapter(named: "hci0"))
        var mark = rig.client.signals.count
        rig.bluez.removeAdapter(adapter)
        _ = await rig.client.signals.expect(from: mark, "adapter removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == adapterPath
        }
        let signals = rig.client.signals.since(mark)
        let removed = signals.filter { $0.member == "InterfacesRemoved" }.map(\.objectPath)
        #expect(removed.last == adapterPath)
        #expect(removed.contains(Self.path) && removed.contains(HeartRateSensor.measurementPath))
        #expect(!adapter.isPresent)
        // As bluetoothd 5.82 logged it: the controller powers off first (the kernel's New
        // Settings, `adapter_stop`), ending the link, then Index Removed takes the device away.
        let deviceGone = try #require(
            signals.firstIndex { $0.member == "InterfacesRemoved" && $0.objectPath == Self.path })
        let poweredOff = signals.firstIndex { $0.changes(adapterPath, adapterInterface, "Powered", to: .bool(false)) }
        let disconnected = signals.firstIndex { $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false)) }
        #expect(poweredOff.map { $0 < deviceGone } == true, "\(signals)")
        #expect(disconnected.map { $0 < deviceGone } == true, "\(signals)")
        mark = rig.client.signals.count
        let back = try rig.bluez.addAdapter(.default)
        #expect(back === adapter)
        _ = await rig.client.signals.expect(from: mark, "bonded device back") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path
        }
        let added = rig.client.signals.since(mark).filter { $0.member == "InterfacesAdded" }.map(\.objectPath)
        #expect(added == [adapterPath, Self.path])
        let objects = try await rig.client.managedObjects()
        #expect(objects[Self.path]?[deviceInterface]?["Paired"] == .bool(true))
        #expect(objects[Self.path]?[deviceInterface]?["Connected"] == .bool(false))
    }

    @Test func restartChangesTheOwnerAndDropsState() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        try await registerPairingAgent(rig)
        try await rig.client.call(Self.path, deviceInterface, "Pair")
        try rig.bluez.addPeripheral(SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "stranger"))
        _ = await rig.client.signals.expect("stranger found") {
            $0.member == "InterfacesAdded" && $0.objectPath.hasSuffix("00_02")
        }
        let oldOwner = try #require(rig.bluez.ownerUniqueName)
        let mark = rig.client.signals.count
        try await rig.bluez.restart()
        let newOwner = try #require(rig.bluez.ownerUniqueName)
        #expect(newOwner != oldOwner)
        _ = await rig.client.signals.expect(from: mark, "new owner") {
            $0.member == "NameOwnerChanged" && $0.arguments.first == .string("org.bluez")
                && $0.arguments.last == .string(newOwner)
        }
        let owners = rig.client.signals.since(mark).filter {
            $0.member == "NameOwnerChanged" && $0.arguments.first == .string("org.bluez")
        }
        #expect(owners.map { $0.arguments.dropFirst().map(\.stringValue) } == [[oldOwner, ""], ["", newOwner]])
        let objects = try await rig.client.managedObjects()
        #expect(objects[adapterPath]?[adapterInterface]?["Discovering"] == .bool(false))
        #expect(objects[Self.path]?[deviceInterface]?["Paired"] == .bool(true), "bonded devices are reloaded")
        #expect(objects[Self.path]?[deviceInterface]?["Connected"] == .bool(false))
        #expect(objects[HeartRateSensor.measurementPath] == nil)
        #expect(objects["/org/bluez/hci0/dev_C0_FF_EE_00_00_02"] == nil, "unbonded devices are forgotten")
        let stop = await rig.client.error(adapterPath, adapterInterface, "StopDiscovery")
        #expect(stop?.message == "No discovery started")
        // The new instance works: discovery and connection again.
        try await startDiscovery(rig.client)
        #expect(await rig.client.error(Self.path, deviceInterface, "Connect") == nil)
    }

    @Test func aRestartAnswersCallsInFlightWithNoReply() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        rig.bluez.inject(.noReply, for: .startDiscovery)
        let client = rig.client
        let call = Task { await client.error(adapterPath, adapterInterface, "StartDiscovery") }
        try await waitUntil("the call arrived") { rig.bluez.unansweredCallCount == 1 }
        try await rig.bluez.restart(downtime: .milliseconds(20))
        let error = await call.value
        #expect(error?.name == "org.freedesktop.DBus.Error.NoReply")
    }

    @Test func propertyOverridesBreakTypesAndPresence() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        var mark = rig.client.signals.count
        rig.bluez.overrideProperty("Powered", of: adapterInterface, at: adapterPath, with: .wrongType)
        let wrong = await rig.client.signals.expect(from: mark, "wrong type announced") {
            $0.isPropertiesChanged && $0.path == adapterPath && $0.changed["Powered"] != nil
        }
        #expect(wrong?.changed["Powered"] == .string("wrong-type"))
        #expect(try await rig.client.property(adapterPath, adapterInterface, "Powered") == .string("wrong-type"))
        rig.bluez.overrideProperty("Address", of: adapterInterface, at: adapterPath, with: .wrongType)
        #expect(try await rig.client.properties(adapterPath, adapterInterface)["Address"] == .int32(0x5a5a))
        mark = rig.client.signals.count
        rig.bluez.overrideProperty("Alias", of: adapterInterface, at: adapterPath, with: .missing)
        let missing = await rig.client.signals.expect(from: mark, "invalidated") {
            $0.isPropertiesChanged && $0.invalidated.contains("Alias")
        }
        #expect(missing != nil)
        #expect(try await rig.client.managedObjects()[adapterPath]?[adapterInterface]?["Alias"] == nil)
        let error = await rig.client.error(
            adapterPath, "org.freedesktop.DBus.Properties", "Get", [.string(adapterInterface), .string("Alias")])
        #expect(error?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        rig.bluez.clearPropertyOverrides()
        #expect(try await rig.client.property(adapterPath, adapterInterface, "Powered") == .bool(true))
        #expect(try await rig.client.property(adapterPath, adapterInterface, "Alias") == .string("BlueZ 5.66"))
    }

    @Test func aDevicePropertyCanBeBrokenThroughItsPeripheral() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = HeartRateSensor()
        try rig.bluez.addPeripheral(sensor.peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        let mark = rig.client.signals.count
        rig.bluez.overrideProperty("RSSI", on: sensor.peripheral, with: .wrongType)
        let change = await rig.client.signals.expect(from: mark, "wrong RSSI") {
            $0.changes(Self.path, deviceInterface, "RSSI")
        }
        #expect(change?.changed["RSSI"] == .string("wrong-type"))
        // Later changes carry the broken value too.
        sensor.peripheral.rssi = -90
        sensor.peripheral.advertise()
        #expect(try await rig.client.property(Self.path, deviceInterface, "RSSI") == .string("wrong-type"))
        rig.bluez.clearPropertyOverride("RSSI", of: deviceInterface, at: Self.path)
        #expect(try await rig.client.property(Self.path, deviceInterface, "RSSI") == .int16(-90))
    }
}
