import BlueZKitTesting
import DBus
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct ConnectionTests {
    static let path = HeartRateSensor.path

    /// With the `Connected` signal the real bluetoothd usually leaves out (`omitsConnectedSignal`
    /// false: the kernel's event won the race), as it comes then.
    @Test func connectSignalsConnectedThenServicesResolvedThenGATTObjects() async throws {
        let rig = try await Rig.start(options: .init(omitsConnectedSignal: false))
        defer { rig.stop() }
        try rig.bluez.addPeripheral(HeartRateSensor().peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        let mark = rig.client.signals.count
        let reply = try await rig.client.reply(Self.path, deviceInterface, "Connect")
        _ = await rig.client.signals.expect(from: mark, "ServicesResolved") {
            $0.changes(Self.path, deviceInterface, "ServicesResolved", to: .bool(true))
        }
        let signals = rig.client.signals.since(mark)
        let connected = try #require(signals.firstIndex { $0.changes(Self.path, deviceInterface, "Connected") })
        let resolved = try #require(signals.firstIndex { $0.changes(Self.path, deviceInterface, "ServicesResolved") })
        let added = signals.enumerated().filter { $0.element.member == "InterfacesAdded" }
        #expect(
            added.map(\.element.objectPath) == [
                Self.path + "/service0006", Self.path + "/service0006/char0007",
                Self.path + "/service0006/char0007/desc0009",
                HeartRateSensor.heartRateService, HeartRateSensor.measurementPath, HeartRateSensor.measurementCCCD,
                HeartRateSensor.locationPath, HeartRateSensor.controlPointPath,
                HeartRateSensor.customService, HeartRateSensor.dataPath, HeartRateSensor.userDescriptionPath,
                HeartRateSensor.commandPath, HeartRateSensor.secretPath, HeartRateSensor.failingPath,
            ])
        // As the real bluetoothd (GATTConformance): the device's PropertiesChanged with UUIDs and
        // ServicesResolved leaves before the services' InterfacesAdded.
        #expect(connected < resolved)
        #expect(added.allSatisfy { $0.offset > resolved })
        // Connected, then the reply, then ServicesResolved and the GATT objects.
        #expect(signals[connected].serial < reply.serial)
        #expect(added.allSatisfy { $0.element.serial > reply.serial })
        #expect(
            signals[resolved].changed["UUIDs"]?.stringArrayValue == [
                uuid16("1800"), uuid16("1801"), uuid16("180d"), "0000aa00-0000-1000-8000-00805f9b34fb",
            ])

        let objects = try await rig.client.managedObjects()
        #expect(objects[Self.path + "/service0001"] == nil, "the GAP service is claimed by bluetoothd")
        let service = try #require(objects[HeartRateSensor.heartRateService]?["org.bluez.GattService1"])
        #expect(service["UUID"] == .string(uuid16("180d")))
        #expect(service["Primary"] == .bool(true))
        #expect(service["Device"] == .objectPath(try ObjectPath(Self.path)))
        #expect(service["Includes"] == .objectPathArray([]))
        let measurement = try #require(objects[HeartRateSensor.measurementPath]?[characteristicInterface])
        #expect(measurement["UUID"] == .string(uuid16("2a37")))
        #expect(measurement["Service"] == .objectPath(try ObjectPath(HeartRateSensor.heartRateService)))
        #expect(measurement["Flags"] == .stringArray(["notify"]))
        #expect(measurement["Notifying"] == .bool(false))
        #expect(measurement["NotifyAcquired"] == .bool(false))
        #expect(measurement["WriteAcquired"] == nil)
        #expect(measurement["Value"] == .bytes([]))
        #expect(measurement["MTU"] == .uint16(517))
        let secret = try #require(objects[HeartRateSensor.secretPath]?[characteristicInterface])
        #expect(secret["Flags"] == .stringArray(["read"]), "permissions are not visible to the client")
        #expect(secret["Notifying"] == nil)
        let cccd = try #require(objects[HeartRateSensor.measurementCCCD]?[descriptorInterface])
        #expect(cccd["UUID"] == .string(uuid16("2902")))
        #expect(cccd["Characteristic"] == .objectPath(try ObjectPath(HeartRateSensor.measurementPath)))
    }

    @Test func disconnectWithoutAGATTCacheRemovesTheGATTObjects() async throws {
        let rig = try await Rig.start(options: .init(gattCache: .no))
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        let reply = try await rig.client.reply(Self.path, deviceInterface, "Disconnect")
        let unresolved = await rig.client.signals.expect(from: mark, "ServicesResolved false") {
            $0.changes(Self.path, deviceInterface, "ServicesResolved", to: .bool(false))
        }
        let disconnected = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false))
        }
        // As device_remove_connection: ServicesResolved, the reply, then Connected.
        #expect(try #require(unresolved).serial < reply.serial)
        #expect(try #require(disconnected).serial > reply.serial)
        _ = await rig.client.signals.expect(from: mark, "service removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == HeartRateSensor.heartRateService
        }
        let removed = rig.client.signals.since(mark).filter { $0.member == "InterfacesRemoved" }.map(\.objectPath)
        let cccd = try #require(removed.firstIndex(of: HeartRateSensor.measurementCCCD))
        let characteristic = try #require(removed.firstIndex(of: HeartRateSensor.measurementPath))
        let service = try #require(removed.firstIndex(of: HeartRateSensor.heartRateService))
        #expect(cccd < characteristic && characteristic < service)
        let objects = try await rig.client.managedObjects()
        #expect(objects.keys.filter { $0.hasPrefix(Self.path + "/") }.isEmpty)
        #expect(objects[Self.path]?[deviceInterface]?["Connected"] == .bool(false))
        #expect(!sensor.peripheral.isConnected)
    }

    @Test func bluetoothdsDefaultCacheKeepsTheGATTObjectsAcrossReconnections() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        try await rig.client.call(Self.path, deviceInterface, "Disconnect")
        var objects = try await rig.client.managedObjects()
        #expect(objects[HeartRateSensor.measurementPath] != nil)
        #expect(objects[HeartRateSensor.measurementPath]?[characteristicInterface]?["MTU"] == nil)
        #expect(objects[Self.path]?[deviceInterface]?["ServicesResolved"] == .bool(false))
        let mark = rig.client.signals.count
        try await rig.client.call(Self.path, deviceInterface, "Connect")
        _ = await rig.client.signals.expect(from: mark, "resolved again") {
            $0.changes(Self.path, deviceInterface, "ServicesResolved", to: .bool(true))
        }
        #expect(!rig.client.signals.since(mark).contains { $0.member == "InterfacesAdded" })
        objects = try await rig.client.managedObjects()
        #expect(objects[HeartRateSensor.measurementPath]?[characteristicInterface]?["MTU"] == .uint16(517))
    }

    @Test func connectingToAConnectedDeviceSucceeds() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        #expect(await rig.client.error(Self.path, deviceInterface, "Connect") == nil)
    }

    @Test func connectingOutOfRangeFailsAfterTheTimeout() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = HeartRateSensor()
        try rig.bluez.addPeripheral(sensor.peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        sensor.peripheral.setInRange(false)
        let error = await rig.client.error(Self.path, deviceInterface, "Connect")
        #expect(error?.name == "org.bluez.Error.Failed")
        #expect(error?.message == "le-connection-abort-by-local")
        #expect(!sensor.peripheral.isConnected)
    }

    @Test func aConnectWaitsForThePeripheralToComeIntoRange() async throws {
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
        let connect = Task { await client.error(Self.path, deviceInterface, "Connect") }
        try await waitUntil("connecting") { rig.bluez.isConnecting(to: sensor.peripheral) }
        #expect(!sensor.peripheral.isConnected)
        sensor.peripheral.setInRange(true)
        #expect(await connect.value == nil)
        #expect(sensor.peripheral.isConnected)
    }

    @Test func disconnectCancelsAConnectInProgress() async throws {
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
        let connect = Task { await client.error(Self.path, deviceInterface, "Connect") }
        try await waitUntil("connecting") { rig.bluez.isConnecting(to: sensor.peripheral) }
        #expect(await rig.client.error(Self.path, deviceInterface, "Disconnect") == nil)
        let error = await connect.value
        #expect(error?.name == "org.bluez.Error.Failed")
        #expect(error?.message == "br-connection-canceled")
    }

    @Test func pairConnectsPairsAndResolves() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try rig.bluez.addPeripheral(HeartRateSensor().peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        let none = await rig.client.error(Self.path, deviceInterface, "CancelPairing")
        #expect(none?.name == "org.bluez.Error.DoesNotExist")
        try await registerPairingAgent(rig)
        let mark = rig.client.signals.count
        try await rig.client.call(Self.path, deviceInterface, "Pair")
        let signals = rig.client.signals.since(mark)
        // The link Pair makes is an ATT connection as Connect's is: no `Connected` signal.
        #expect(!signals.contains { $0.changes(Self.path, deviceInterface, "Connected") })
        #expect(try await rig.client.property(Self.path, deviceInterface, "Connected") == .bool(true))
        #expect(signals.contains { $0.changes(Self.path, deviceInterface, "Paired", to: .bool(true)) })
        #expect(signals.contains { $0.changes(Self.path, deviceInterface, "ServicesResolved", to: .bool(true)) })
        #expect(try await rig.client.property(Self.path, deviceInterface, "Bonded") == .bool(true))
        let again = await rig.client.error(Self.path, deviceInterface, "Pair")
        #expect(again?.name == "org.bluez.Error.AlreadyExists")
    }

    @Test func pairWithoutAnyAgentFailsAuthentication() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let error = await rig.client.error(Self.path, deviceInterface, "Pair")
        #expect(error?.name == "org.bluez.Error.AuthenticationFailed")
        #expect(try await rig.client.property(Self.path, deviceInterface, "Paired") == .bool(false))
    }

    @Test func cancelPairingEndsAPairInProgress() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        rig.bluez.inject(.delay(.seconds(10)), for: .pair)
        let client = rig.client
        let pair = Task { await client.error(Self.path, deviceInterface, "Pair") }
        try await waitUntil("pairing") { rig.bluez.isPairing(sensor.peripheral) }
        let busy = await rig.client.error(Self.path, deviceInterface, "Pair")
        #expect(busy?.name == "org.bluez.Error.InProgress")
        #expect(await rig.client.error(Self.path, deviceInterface, "CancelPairing") == nil)
        let error = await pair.value
        #expect(error?.name == "org.bluez.Error.AuthenticationCanceled")
        #expect(try await rig.client.property(Self.path, deviceInterface, "Paired") == .bool(false))
    }

    @Test func removeDeviceDisconnectsThenRemoves() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        try await rig.client.call(
            adapterPath, adapterInterface, "RemoveDevice", [.objectPath(try ObjectPath(Self.path))])
        _ = await rig.client.signals.expect(from: mark, "device removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == Self.path
        }
        let signals = rig.client.signals.since(mark)
        let disconnected = try #require(
            signals.firstIndex { $0.changes(Self.path, deviceInterface, "Connected", to: .bool(false)) })
        let removed = try #require(
            signals.firstIndex { $0.member == "InterfacesRemoved" && $0.objectPath == Self.path })
        #expect(disconnected < removed)
        #expect(!sensor.peripheral.isConnected)
        let unknown = await rig.client.error(
            adapterPath, adapterInterface, "RemoveDevice", [.objectPath(try ObjectPath(Self.path))])
        #expect(unknown?.name == "org.bluez.Error.DoesNotExist")
    }

    /// bluetoothd's usual outcome (the default): no `Connected` signal for a link `Connect` made.
    @Test func aConnectLeavesOnlyServicesResolvedByDefault() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let mark = rig.client.signals.count
        try await connectSensor(rig)
        #expect(!rig.client.signals.since(mark).contains { $0.changes(Self.path, deviceInterface, "Connected") })
        #expect(try await rig.client.property(Self.path, deviceInterface, "Connected") == .bool(true))
    }

    @Test func pairingAnUnreachableDeviceFailsWithAPageTimeout() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = HeartRateSensor()
        try rig.bluez.addPeripheral(sensor.peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == Self.path }
        sensor.peripheral.setInRange(false)
        let error = await rig.client.error(Self.path, deviceInterface, "Pair")
        #expect(error?.name == "org.bluez.Error.ConnectionAttemptFailed")
        #expect(error?.message == "Page Timeout")
        #expect(try await rig.client.property(Self.path, deviceInterface, "Paired") == .bool(false))
    }

    @Test func includedServicesAndSecondaryServicesAreExported() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let battery = SimulatedService(
            uuid: "180F", isPrimary: false,
            characteristics: [SimulatedCharacteristic(uuid: "2A19", flags: ["read"], value: [90])])
        let main = SimulatedService(uuid: "AA00", characteristics: [], includes: [battery])
        let peripheral = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:05", services: [main, battery], includesStandardServices: false)
        try rig.bluez.addPeripheral(peripheral)
        try await startDiscovery(rig.client)
        let device = "/org/bluez/hci0/dev_C0_FF_EE_00_00_05"
        _ = await rig.client.signals.expect("found") { $0.member == "InterfacesAdded" && $0.objectPath == device }
        try await rig.client.call(device, deviceInterface, "Connect")
        _ = await rig.client.signals.expect("resolved") {
            $0.changes(device, deviceInterface, "ServicesResolved", to: .bool(true))
        }
        let objects = try await rig.client.managedObjects()
        // 0x0001 main, 0x0002 its include declaration, 0x0003 battery.
        #expect(main.objectPath == device + "/service0001")
        #expect(battery.objectPath == device + "/service0003")
        #expect(
            objects[device + "/service0001"]?["org.bluez.GattService1"]?["Includes"]
                == .objectPathArray([try ObjectPath(device + "/service0003")]))
        #expect(objects[device + "/service0003"]?["org.bluez.GattService1"]?["Primary"] == .bool(false))
        #expect(objects[device]?[deviceInterface]?["UUIDs"] == .stringArray([uuid16("aa00")]))
    }
}
