import BlueZKitTesting
import DBus
import Testing

@Suite(.timeLimit(.minutes(5))) struct AdapterTests {
    @Test func managedObjectsListTheAdapters() async throws {
        let rig = try await Rig.start(adapters: [
            .default, .init(address: "00:11:22:33:44:55", systemName: "second", powered: false),
        ])
        defer { rig.stop() }
        let objects = try await rig.client.managedObjects()
        #expect(objects["/org/bluez"]?["org.bluez.AgentManager1"] != nil)
        let first = try #require(objects["/org/bluez/hci0"]?[adapterInterface])
        #expect(first["Address"] == .string("00:AA:01:00:00:00"))
        #expect(first["AddressType"] == .string("public"))
        #expect(first["Powered"] == .bool(true))
        #expect(first["Discovering"] == .bool(false))
        #expect(first["Pairable"] == .bool(true))
        #expect(first["Alias"] == .string("BlueZ 5.66"))
        #expect(first["Modalias"] == .string("usb:v1D6Bp0246d0542"))
        #expect(first["Roles"] == .stringArray(["central", "peripheral"]))
        #expect(first["UUIDs"]?.stringArrayValue?.contains(uuid16("1801")) == true)
        let second = try #require(objects["/org/bluez/hci1"]?[adapterInterface])
        #expect(second["Address"] == .string("00:11:22:33:44:55"))
        #expect(second["Powered"] == .bool(false))
        #expect(second["Name"] == .string("second"))
        #expect(rig.bluez.adapters.map(\.name) == ["hci0", "hci1"])
    }

    @Test func settingPoweredEmitsPropertiesChanged() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let mark = rig.client.signals.count
        let reply = try await rig.client.reply(
            adapterPath, "org.freedesktop.DBus.Properties", "Set",
            [.string(adapterInterface), .string("Powered"), .variant(.bool(false))])
        let change = await rig.client.signals.expect(from: mark, "Powered false") {
            $0.changes(adapterPath, adapterInterface, "Powered", to: .bool(false))
        }
        // As property_set_mode_complete: the reply, then the change.
        #expect(reply.serial < (change?.serial ?? 0))
        #expect(change?.changed["Discovering"] == .bool(false))
        #expect(try await rig.client.property(adapterPath, adapterInterface, "Powered") == .bool(false))
        #expect(rig.bluez.adapters.first?.isPowered == false)
        try await rig.client.set(adapterPath, adapterInterface, "Powered", .bool(true))
        _ = await rig.client.signals.expect(from: mark, "Powered true") {
            $0.changes(adapterPath, adapterInterface, "Powered", to: .bool(true))
        }
    }

    @Test func propertyErrorsAreGDBusErrors() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let properties = "org.freedesktop.DBus.Properties"
        let wrongType = await rig.client.error(
            adapterPath, properties, "Set", [.string(adapterInterface), .string("Powered"), .variant(.string("yes"))])
        #expect(wrongType?.name == "org.freedesktop.DBus.Error.InvalidSignature")
        let readOnly = await rig.client.error(
            adapterPath, properties, "Set", [.string(adapterInterface), .string("Address"), .variant(.string("x"))])
        #expect(readOnly?.name == "org.freedesktop.DBus.Error.PropertyReadOnly")
        let unknown = await rig.client.error(
            adapterPath, properties, "Set", [.string(adapterInterface), .string("Nope"), .variant(.bool(true))])
        #expect(unknown?.name == "org.freedesktop.DBus.Error.UnknownProperty")
        let noInterface = await rig.client.error(adapterPath, properties, "GetAll", [.string("org.bluez.Nope")])
        #expect(noInterface?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(noInterface?.message == "No such interface 'org.bluez.Nope'")
        let noProperty = await rig.client.error(
            adapterPath, properties, "Get", [.string(adapterInterface), .string("Nope")])
        #expect(noProperty?.message == "No such property 'Nope'")
    }

    @Test func unknownObjectsAndMethodsAreRejected() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let object = await rig.client.error("/org/bluez/hci9", adapterInterface, "StartDiscovery")
        #expect(object?.name == "org.freedesktop.DBus.Error.UnknownObject")
        let method = await rig.client.error(adapterPath, deviceInterface, "Connect")
        #expect(method?.name == "org.freedesktop.DBus.Error.UnknownMethod")
        let signature = await rig.client.error(adapterPath, adapterInterface, "StartDiscovery", [.bool(true)])
        #expect(signature?.name == "org.freedesktop.DBus.Error.UnknownMethod")
        #expect(signature?.message.contains("signature \"b\"") == true)
    }

    @Test func aliasFallsBackToTheSystemName() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let mark = rig.client.signals.count
        try await rig.client.set(adapterPath, adapterInterface, "Alias", .string("kitchen"))
        _ = await rig.client.signals.expect(from: mark, "Alias kitchen") {
            $0.changes(adapterPath, adapterInterface, "Alias", to: .string("kitchen"))
        }
        try await rig.client.set(adapterPath, adapterInterface, "Alias", .string(""))
        _ = await rig.client.signals.expect(from: mark, "Alias reset") {
            $0.changes(adapterPath, adapterInterface, "Alias", to: .string("BlueZ 5.66"))
        }
    }

    @Test func discoverableNeedsPower() async throws {
        let rig = try await Rig.start(adapters: [.init(powered: false)])
        defer { rig.stop() }
        let error = await rig.client.error(
            adapterPath, "org.freedesktop.DBus.Properties", "Set",
            [.string(adapterInterface), .string("Discoverable"), .variant(.bool(true))])
        #expect(error?.name == "org.bluez.Error.NotReady")
        #expect(error?.message == "Resource Not Ready")
    }

    @Test func invalidConfigurationsAreRejected() async throws {
        await #expect(throws: SimulatedBlueZError.self) {
            _ = try await SimulatedBlueZ.start(adapters: [.init(address: "not-an-address")])
        }
        let rig = try await Rig.start()
        defer { rig.stop() }
        #expect(throws: SimulatedBlueZError(.alreadyExists, "an adapter hci0 or 00:AA:01:00:00:00 exists")) {
            try rig.bluez.addAdapter(.init(name: "hci0"))
        }
        let bad = SimulatedPeripheral(address: "C0:FF:EE:00:00:09", services: [SimulatedService(uuid: "xyz")])
        do {
            try rig.bluez.addPeripheral(bad)
            Issue.record("an invalid UUID was accepted")
        } catch {
            #expect(error.code == .invalidConfiguration)
        }
    }
}
