import BlueZKitTesting
import DBus
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct AdvertisingManagerTests {
    static let manager = "org.bluez.LEAdvertisingManager1"

    static func manufacturer(_ count: Int) -> DBusValue {
        .dictionary(key: "q", value: "v", [.init(.uint16(0x0059), .variant(.bytes(Array(repeating: 7, count: count))))])
    }

    @Test func registerAdvertisementReadsItsPropertiesBeforeReplying() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        #expect(
            try await rig.client.properties(adapterPath, Self.manager) == [
                "ActiveInstances": .byte(0), "SupportedInstances": .byte(5),
                "SupportedIncludes": .stringArray(["tx-power", "appearance", "local-name"]),
            ])
        let advertisement = try await TestAdvertisement(
            address: rig.bluez.busAddress,
            properties: [
                "Type": .string("peripheral"), "ServiceUUIDs": .stringArray(["180D"]), "LocalName": .string("Pulse"),
                "ManufacturerData": Self.manufacturer(2),
                "ServiceData": .dictionary(key: "s", value: "v", [.init(.string("180D"), .variant(.bytes([1])))]),
                "Includes": .stringArray(["tx-power", "rsi"]), "Appearance": .uint16(0x0341),
                "Discoverable": .bool(true),
            ])
        defer { advertisement.close() }
        #expect(await advertisement.call("RegisterAdvertisement") == nil)
        let registered = try #require(rig.bluez.adapters[0].registeredAdvertisements.first)
        #expect(registered.owner == advertisement.connection.uniqueName?.rawValue)
        #expect(registered.path == "/adv0")
        #expect(registered.type == "peripheral")
        #expect(registered.serviceUUIDs == [uuid16("180D")])
        #expect(registered.localName == "Pulse")
        #expect(registered.manufacturerData == [0x0059: [7, 7]])
        #expect(registered.serviceData == [uuid16("180D"): [1]])
        #expect(registered.includes == ["tx-power"])
        #expect(registered.appearance == 0x0341)
        #expect(registered.discoverable == true)
        // Flags 3 + UUIDs 4 + manufacturer data 6 + service data 5 + appearance 4.
        #expect(registered.dataLength == 22)
        #expect(try await rig.client.property(adapterPath, Self.manager, "ActiveInstances") == .byte(1))
        #expect(try await rig.client.property(adapterPath, Self.manager, "SupportedInstances") == .byte(4))
        #expect(await advertisement.call("RegisterAdvertisement")?.name == "org.bluez.Error.AlreadyExists")
        #expect(await advertisement.call("UnregisterAdvertisement") == nil)
        #expect(rig.bluez.adapters[0].registeredAdvertisements.isEmpty)
        #expect(await advertisement.call("UnregisterAdvertisement")?.name == "org.bluez.Error.DoesNotExist")
        // bluetoothd 5.66 does not call Release for UnregisterAdvertisement.
        #expect(advertisement.releaseCount == 0)
    }

    @Test func invalidOrOversizedAdvertisementsFailAsInBlueZ() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let long = "12345678-1234-5678-1234-56789abcdef0"
        let cases: [(String, [String: DBusValue], Bool)] = [
            ("bad type", ["Type": .string("central")], false),
            ("type not a string", ["Type": .uint16(1)], false),
            ("bad UUID", ["Type": .string("peripheral"), "ServiceUUIDs": .stringArray(["xyz"])], false),
            (
                "name twice",
                ["Type": .string("peripheral"), "LocalName": .string("A"), "Includes": .stringArray(["local-name"])],
                false
            ),
            ("discoverable broadcast", ["Type": .string("broadcast"), "Discoverable": .bool(true)], false),
            (
                "two 128-bit UUIDs",
                ["Type": .string("peripheral"), "ServiceUUIDs": .stringArray([long, long.uppercased()])], false
            ),
            ("31 bytes", ["Type": .string("broadcast"), "ManufacturerData": Self.manufacturer(27)], true),
            (
                "31 bytes and flags",
                [
                    "Type": .string("peripheral"), "ManufacturerData": Self.manufacturer(27),
                    "Discoverable": .bool(true),
                ], false
            ),
            (
                "28 bytes and flags",
                [
                    "Type": .string("peripheral"), "ManufacturerData": Self.manufacturer(21),
                    "Discoverable": .bool(true),
                ], true
            ),
            (
                "tx power included",
                [
                    "Type": .string("broadcast"), "ManufacturerData": Self.manufacturer(25),
                    "Includes": .stringArray(["tx-power"]),
                ], false
            ),
        ]
        for (name, properties, fits) in cases {
            let advertisement = try await TestAdvertisement(address: rig.bluez.busAddress, properties: properties)
            defer { advertisement.close() }
            let error = await advertisement.call("RegisterAdvertisement")
            if fits {
                #expect(error == nil, "\(name)")
                #expect(await advertisement.call("UnregisterAdvertisement") == nil, "\(name)")
            } else {
                #expect(error?.name == "org.bluez.Error.Failed", "\(name)")
                #expect(error?.message == "Failed to parse advertisement.", "\(name)")
            }
        }
        #expect(rig.bluez.adapters[0].registeredAdvertisements.isEmpty)
    }

    @Test func releaseAndOwnerLossEndAnAdvertisement() async throws {
        let rig = try await Rig.start(adapters: [.init(), .init()])
        defer { rig.stop() }
        let second = rig.bluez.adapters[1]
        let advertisement = try await TestAdvertisement(
            address: rig.bluez.busAddress, properties: ["Type": .string("peripheral")])
        defer { advertisement.close() }
        #expect(await advertisement.call("RegisterAdvertisement", adapter: second.objectPath) == nil)
        rig.bluez.removeAdapter(second)
        try await waitUntil("Release is called") { advertisement.releaseCount == 1 }
        let leaving = try await TestAdvertisement(
            address: rig.bluez.busAddress, properties: ["Type": .string("peripheral")])
        #expect(await leaving.call("RegisterAdvertisement") == nil)
        let first = rig.bluez.adapters[0]
        #expect(first.registeredAdvertisements.count == 1)
        leaving.close()
        try await waitUntil("the advertisement is dropped") { first.registeredAdvertisements.isEmpty }
        #expect(try await rig.client.property(adapterPath, Self.manager, "ActiveInstances") == .byte(0))
    }

    @Test func aTimeoutOrARestartReleasesTheAdvertisement() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let adapter = rig.bluez.adapters[0]
        let expiring = try await TestAdvertisement(
            address: rig.bluez.busAddress, path: "/expiring",
            properties: ["Type": .string("peripheral"), "Timeout": .uint16(1)])
        defer { expiring.close() }
        let lasting = try await TestAdvertisement(
            address: rig.bluez.busAddress, properties: ["Type": .string("peripheral")])
        defer { lasting.close() }
        #expect(await expiring.call("RegisterAdvertisement") == nil)
        // Its Timeout was read (unless a loaded machine took the whole second to get here).
        let timeout = adapter.registeredAdvertisements.first { $0.path == "/expiring" }?.timeout
        #expect(timeout == 1 || expiring.releaseCount == 1)
        #expect(await lasting.call("RegisterAdvertisement") == nil)
        try await waitUntil("the advertisement times out") { expiring.releaseCount == 1 }
        #expect(adapter.registeredAdvertisements.map(\.path) == ["/adv0"])
        #expect(lasting.releaseCount == 0)
        try await rig.bluez.restart()
        try await waitUntil("bluetoothd exiting releases the advertisement") { lasting.releaseCount == 1 }
        #expect(adapter.registeredAdvertisements.isEmpty)
        #expect(expiring.releaseCount == 1)
    }

    @Test func anotherAdapterDiscoversTheAdvertisement() async throws {
        let rig = try await Rig.start(adapters: [.init(), .init()])
        defer { rig.stop() }
        let advertiser = rig.bluez.adapters[0]
        let scanner = rig.bluez.adapters[1]
        let advertisement = try await TestAdvertisement(
            address: rig.bluez.busAddress,
            properties: [
                "Type": .string("peripheral"), "ServiceUUIDs": .stringArray(["180D"]), "LocalName": .string("Pulse"),
                "ManufacturerData": Self.manufacturer(2), "Discoverable": .bool(true),
            ])
        defer { advertisement.close() }
        try await startDiscovery(rig.client, adapter: scanner.objectPath)
        #expect(await advertisement.call("RegisterAdvertisement") == nil)
        let device = scanner.objectPath + "/dev_" + advertiser.address.replacingOccurrences(of: ":", with: "_")
        let found = await rig.client.signals.expect("the advertiser is found") {
            $0.member == "InterfacesAdded" && $0.objectPath == device
        }
        let properties = try #require(found?.added[deviceInterface])
        #expect(properties["Name"] == .string("Pulse"))
        #expect(properties["UUIDs"] == .stringArray([uuid16("180D")]))
        #expect(
            properties["ManufacturerData"]
                == .dictionary(key: "q", value: "v", [.init(.uint16(0x59), .variant(.bytes([7, 7])))]))
        // The advertising adapter does not see itself.
        let objects = try await rig.client.managedObjects()
        #expect(!objects.keys.contains { $0.hasPrefix(advertiser.objectPath + "/dev_") })
    }

    @Test func anAdapterAddedLaterAlsoSeesTheAdvertisement() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let advertisement = try await TestAdvertisement(
            address: rig.bluez.busAddress,
            properties: [
                "Type": .string("peripheral"), "Includes": .stringArray(["local-name"]), "Discoverable": .bool(true),
            ])
        defer { advertisement.close() }
        #expect(await advertisement.call("RegisterAdvertisement") == nil)
        let scanner = try rig.bluez.addAdapter(.init(name: "hci1"))
        try await startDiscovery(rig.client, adapter: scanner.objectPath)
        let device =
            scanner.objectPath + "/dev_" + rig.bluez.adapters[0].address.replacingOccurrences(of: ":", with: "_")
        let found = await rig.client.signals.expect("the advertiser is found") {
            $0.member == "InterfacesAdded" && $0.objectPath == device
        }
        // Includes "local-name": the kernel puts the adapter's name in the scan response.
        #expect(found?.added[deviceInterface]?["Name"] == .string("BlueZ 5.66"))
    }
}
