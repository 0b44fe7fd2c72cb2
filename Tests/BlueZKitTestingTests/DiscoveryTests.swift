import BlueZKitTesting
import DBus
import Testing

@Suite(.timeLimit(.minutes(5))) struct DiscoveryTests {
    static func peripheral(_ last: String, uuids: [String], rssi: Int16 = -60, flags: UInt8 = 0x06)
        -> SimulatedPeripheral
    {
        SimulatedPeripheral(
            address: "C0:FF:EE:00:00:" + last, name: "P" + last, rssi: rssi, serviceUUIDs: uuids,
            advertisingFlags: flags)
    }

    static func path(_ last: String) -> String { "/org/bluez/hci0/dev_C0_FF_EE_00_00_" + last }

    @Test func discoveryAnnouncesDevicesWithTheirAdvertisingData() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = HeartRateSensor()
        try rig.bluez.addPeripheral(sensor.peripheral)
        let reply = try await rig.client.reply(adapterPath, adapterInterface, "StartDiscovery")
        let added = await rig.client.signals.expect("InterfacesAdded") {
            $0.member == "InterfacesAdded" && $0.objectPath == HeartRateSensor.path
        }
        let device = try #require(added?.added[deviceInterface])
        #expect(device["Address"] == .string(HeartRateSensor.address))
        #expect(device["AddressType"] == .string("public"))
        #expect(device["Name"] == .string("HRM"))
        #expect(device["Alias"] == .string("HRM"))
        for flag in ["Paired", "Bonded", "Trusted", "Blocked", "LegacyPairing", "Connected", "ServicesResolved"] {
            #expect(device[flag] == .bool(false), "\(flag)")
        }
        #expect(device["UUIDs"] == .stringArray([uuid16("180d")]))
        #expect(device["Adapter"] == .objectPath(try ObjectPath(adapterPath)))
        #expect(device["RSSI"] == .int16(-55))
        #expect(device["TxPower"] == .int16(4))
        #expect(
            device["ManufacturerData"]
                == .dictionary(key: "q", value: "v", [.init(.uint16(0x004C), .variant(.bytes([1, 2])))]))
        #expect(
            device["ServiceData"]
                == .dictionary(key: "s", value: "v", [.init(.string(uuid16("180d")), .variant(.bytes([9])))]))
        #expect(device["AdvertisingFlags"] == .bytes([6]))
        // The reply, then Discovering, then the devices.
        let discovering = try #require(
            rig.client.signals.all.first { $0.changes(adapterPath, adapterInterface, "Discovering", to: .bool(true)) })
        #expect(reply.serial < discovering.serial)
        #expect(discovering.serial < (added?.serial ?? 0))
    }

    @Test func aCachedDeviceGetsRSSIOnTheNextAdvertisement() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let peripheral = Self.peripheral("01", uuids: ["180D"], rssi: -60)
        try rig.bluez.addPeripheral(peripheral)
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["Transport": .string("le")])])
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        // A filtered discovery reports every advertisement, even with the same RSSI.
        var mark = rig.client.signals.count
        peripheral.advertise()
        _ = await rig.client.signals.expect(from: mark, "same RSSI again") {
            $0.changes(Self.path("01"), deviceInterface, "RSSI", to: .int16(-60))
        }
        mark = rig.client.signals.count
        peripheral.rssi = -70
        peripheral.name = "renamed"
        peripheral.advertise()
        let change = await rig.client.signals.expect(from: mark, "new RSSI") {
            $0.changes(Self.path("01"), deviceInterface, "RSSI")
        }
        #expect(change?.changed["RSSI"] == .int16(-70))
        #expect(change?.changed["Name"] == .string("renamed"))
        #expect(rig.client.signals.since(mark).filter { $0.member == "InterfacesAdded" }.isEmpty)
    }

    @Test func anUnfilteredDiscoveryReportsRSSIChangesOfEightOrMore() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let peripheral = Self.peripheral("01", uuids: [], rssi: -60)
        try rig.bluez.addPeripheral(peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        let mark = rig.client.signals.count
        peripheral.rssi = -63
        peripheral.advertise()
        peripheral.rssi = -75
        peripheral.advertise()
        let change = await rig.client.signals.expect(from: mark, "RSSI") {
            $0.changes(Self.path("01"), deviceInterface, "RSSI")
        }
        #expect(change?.changed["RSSI"] == .int16(-75))
    }

    @Test func stoppingInvalidatesRSSIAndKeepsTheDevice() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try rig.bluez.addPeripheral(HeartRateSensor().peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") {
            $0.member == "InterfacesAdded" && $0.objectPath == HeartRateSensor.path
        }
        let mark = rig.client.signals.count
        try await rig.client.call(adapterPath, adapterInterface, "StopDiscovery")
        let invalidated = await rig.client.signals.expect(from: mark, "RSSI invalidated") {
            $0.isPropertiesChanged && $0.path == HeartRateSensor.path && $0.invalidated.contains("RSSI")
        }
        #expect(invalidated?.invalidated.contains("TxPower") == true)
        _ = await rig.client.signals.expect(from: mark, "Discovering false") {
            $0.changes(adapterPath, adapterInterface, "Discovering", to: .bool(false))
        }
        let device = try #require(try await rig.client.managedObjects()[HeartRateSensor.path]?[deviceInterface])
        #expect(device["RSSI"] == nil)
        #expect(device["Name"] == .string("HRM"))
    }

    @Test func aUUIDFilterHidesOtherDevices() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let wanted = Self.peripheral("01", uuids: ["180D"])
        let other = Self.peripheral("02", uuids: ["180F"])
        try rig.bluez.addPeripheral(wanted)
        try rig.bluez.addPeripheral(other)
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["UUIDs": .stringArray(["180D"])])])
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("wanted found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        other.advertise()
        wanted.advertise()
        _ = await rig.client.signals.expect("wanted again") { $0.changes(Self.path("01"), deviceInterface, "RSSI") }
        #expect(!rig.client.signals.all.contains { $0.objectPath == Self.path("02") })
        #expect(try await rig.client.managedObjects()[Self.path("02")] == nil)
    }

    @Test func filtersOfTwoClientsAreMerged() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let second = try await BlueZClient(address: rig.bluez.busAddress)
        defer { second.close() }
        let heart = Self.peripheral("01", uuids: ["180D"], rssi: -60)
        let battery = Self.peripheral("02", uuids: ["180F"], rssi: -65)
        let faint = Self.peripheral("03", uuids: ["180F"], rssi: -80)
        for peripheral in [heart, battery, faint] { try rig.bluez.addPeripheral(peripheral) }
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter",
            [filter(["UUIDs": .stringArray(["180D"]), "RSSI": .int16(-50)])])
        try await second.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter",
            [filter(["UUIDs": .stringArray(["180F"]), "RSSI": .int16(-70)])])
        try await startDiscovery(rig.client)
        try await second.call(adapterPath, adapterInterface, "StartDiscovery")
        // Union of UUIDs, lowest RSSI (-70): both strong devices, not the faint one; every client sees all.
        for last in ["01", "02"] {
            _ = await rig.client.signals.expect("\(last) found") {
                $0.member == "InterfacesAdded" && $0.objectPath == Self.path(last)
            }
            _ = await second.signals.expect("\(last) found by second") {
                $0.member == "InterfacesAdded" && $0.objectPath == Self.path(last)
            }
        }
        faint.advertise()
        heart.advertise()
        _ = await rig.client.signals.expect("heart again") { $0.changes(Self.path("01"), deviceInterface, "RSSI") }
        #expect(!rig.client.signals.all.contains { $0.objectPath == Self.path("03") })
        // The second client leaves: only the first filter (-50) remains, and the heart sensor (-60) is filtered out.
        try await second.call(adapterPath, adapterInterface, "StopDiscovery")
        let mark = rig.client.signals.count
        heart.advertise()
        battery.rssi = -40
        battery.advertise()
        try await rig.client.call(adapterPath, adapterInterface, "GetDiscoveryFilters")
        #expect(
            !rig.client.signals.since(mark).contains {
                $0.isPropertiesChanged && $0.objectPath.hasPrefix(Self.path("0"))
            })
    }

    @Test func stopDiscoveryRules() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let notStarted = await rig.client.error(adapterPath, adapterInterface, "StopDiscovery")
        #expect(notStarted?.name == "org.bluez.Error.Failed")
        #expect(notStarted?.message == "No discovery started")
        try await startDiscovery(rig.client)
        let twice = await rig.client.error(adapterPath, adapterInterface, "StartDiscovery")
        #expect(twice?.name == "org.bluez.Error.InProgress")
        let second = try await BlueZClient(address: rig.bluez.busAddress)
        defer { second.close() }
        let otherClient = await second.error(adapterPath, adapterInterface, "StopDiscovery")
        #expect(otherClient?.message == "No discovery started")
        try await second.call(adapterPath, adapterInterface, "StartDiscovery")
        #expect(rig.bluez.adapters[0].discoverySessionCount == 2)
        try await rig.client.call(adapterPath, adapterInterface, "StopDiscovery")
        #expect(try await rig.client.property(adapterPath, adapterInterface, "Discovering") == .bool(true))
        let mark = rig.client.signals.count
        try await second.call(adapterPath, adapterInterface, "StopDiscovery")
        _ = await rig.client.signals.expect(from: mark, "Discovering false") {
            $0.changes(adapterPath, adapterInterface, "Discovering", to: .bool(false))
        }
    }

    @Test func aClientLeavingTheBusStopsItsDiscovery() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let leaving = try await BlueZClient(address: rig.bluez.busAddress)
        try await leaving.call(adapterPath, adapterInterface, "StartDiscovery")
        _ = await rig.client.signals.expect("Discovering true") {
            $0.changes(adapterPath, adapterInterface, "Discovering", to: .bool(true))
        }
        leaving.close()
        _ = await rig.client.signals.expect("Discovering false") {
            $0.changes(adapterPath, adapterInterface, "Discovering", to: .bool(false))
        }
        #expect(rig.bluez.adapters[0].discoverySessionCount == 0)
    }

    @Test func duplicateDataReportsEveryAdvertisement() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let peripheral = SimulatedPeripheral(address: "C0:FF:EE:00:00:01", rssi: -60, manufacturerData: [0x0059: [7]])
        try rig.bluez.addPeripheral(peripheral)
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        // Without DuplicateData the same data is not announced again.
        var mark = rig.client.signals.count
        peripheral.advertise()
        peripheral.manufacturerData = [0x0059: [8]]
        peripheral.advertise()
        let first = await rig.client.signals.expect(from: mark, "changed data") {
            $0.changes(Self.path("01"), deviceInterface, "ManufacturerData")
        }
        #expect(
            first?.changed["ManufacturerData"]
                == .dictionary(key: "q", value: "v", [.init(.uint16(0x59), .variant(.bytes([8])))]))
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["DuplicateData": .bool(true)])])
        mark = rig.client.signals.count
        peripheral.advertise()
        _ = await rig.client.signals.expect(from: mark, "same data again") {
            $0.changes(Self.path("01"), deviceInterface, "ManufacturerData")
        }
    }

    @Test func aPatternFilterMatchesAddressOrNamePrefixes() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let peripherals = [
            Self.peripheral("01", uuids: []), SimulatedPeripheral(address: "AA:00:00:00:00:02", name: "Lamp"),
            SimulatedPeripheral(address: "AA:00:00:00:00:03", name: "Other"),
        ]
        for peripheral in peripherals { try rig.bluez.addPeripheral(peripheral) }
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["Pattern": .string("C0:FF")])])
        let second = try await BlueZClient(address: rig.bluez.busAddress)
        defer { second.close() }
        try await second.call(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["Pattern": .string("La")])])
        try await second.call(adapterPath, adapterInterface, "StartDiscovery")
        try await rig.client.call(adapterPath, adapterInterface, "StartDiscovery")
        // The merged kernel filter did not change, so the scan goes on: devices show up as they advertise.
        for peripheral in peripherals { peripheral.advertise() }
        _ = await rig.client.signals.expect("address match") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        _ = await rig.client.signals.expect("name match") {
            $0.member == "InterfacesAdded" && $0.objectPath == "/org/bluez/hci0/dev_AA_00_00_00_00_02"
        }
        #expect(try await rig.client.managedObjects()["/org/bluez/hci0/dev_AA_00_00_00_00_03"] == nil)
    }

    @Test func nonDiscoverablePeripheralsNeedAFilterAndNonConnectableOnesGoWhenDiscoveryStops() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let beacon = SimulatedPeripheral(address: "C0:FF:EE:00:00:01", advertisingFlags: 0, isConnectable: false)
        try rig.bluez.addPeripheral(beacon)
        try rig.bluez.addPeripheral(Self.peripheral("02", uuids: []))
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("discoverable one found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("02")
        }
        #expect(try await rig.client.managedObjects()[Self.path("01")] == nil)
        try await rig.client.call(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["RSSI": .int16(-100)])])
        _ = await rig.client.signals.expect("beacon found with a filter") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        try await rig.client.call(adapterPath, adapterInterface, "StopDiscovery")
        _ = await rig.client.signals.expect("beacon removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == Self.path("01")
        }
        let objects = try await rig.client.managedObjects()
        #expect(objects[Self.path("01")] == nil)
        #expect(objects[Self.path("02")] != nil)
    }

    @Test func aPeripheralWithAnIntervalAdvertisesOnItsOwn() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let beacon = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", rssi: -60, advertisingInterval: .milliseconds(10))
        try rig.bluez.addPeripheral(beacon)
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["Transport": .string("le")])])
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("found") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.path("01")
        }
        let mark = rig.client.signals.count
        for _ in 0..<3 {
            let seen = rig.client.signals.count
            _ = await rig.client.signals.expect(from: seen, "periodic report") {
                $0.changes(Self.path("01"), deviceInterface, "RSSI")
            }
        }
        #expect(
            rig.client.signals.since(mark).filter { $0.changes(Self.path("01"), deviceInterface, "RSSI") }.count >= 3)
    }
}
