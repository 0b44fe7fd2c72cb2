import BlueZKitTesting
import DBus
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct GattManagerTests {
    static let manager = "org.bluez.GattManager1"

    @Test func registerApplicationReadsTheCallersTreeBeforeReplying() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let objects = try await rig.client.managedObjects()
        #expect(objects[adapterPath]?[Self.manager] == [:])
        let app = try await TestGATTApplication.standard(address: rig.bluez.busAddress)
        defer { app.close() }
        try await app.register()
        // Registered by the time the reply arrives: bluetoothd read the tree first.
        let registered = try #require(rig.bluez.adapters[0].registeredApplications.first)
        #expect(registered.owner == app.connection.uniqueName?.rawValue)
        #expect(registered.path == "/app")
        #expect(registered.serviceUUIDs == [uuid16("180D")])
        let characteristic = try #require(registered.characteristic(serviceUUID: "180d", characteristicUUID: "2A37"))
        #expect(characteristic.path == "/app/service0/char0")
        #expect(characteristic.flags == ["read", "write", "notify", "write-without-response"])
        #expect(characteristic.descriptors.map(\.uuid) == [uuid16("2901")])
        #expect(await app.registrationError()?.name == "org.bluez.Error.AlreadyExists")
        // Another client cannot unregister it: registrations are per caller.
        let foreign = await rig.client.error(
            adapterPath, Self.manager, "UnregisterApplication", [.objectPath(try ObjectPath("/app"))])
        #expect(foreign?.name == "org.bluez.Error.DoesNotExist")
        #expect(await app.registrationError(member: "UnregisterApplication") == nil)
        #expect(rig.bluez.adapters[0].registeredApplications.isEmpty)
        #expect(await app.registrationError(member: "UnregisterApplication")?.name == "org.bluez.Error.DoesNotExist")
    }

    @Test func aTreeTheCallerDoesNotServeFails() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let error = await rig.client.error(
            adapterPath, Self.manager, "RegisterApplication", [.objectPath(try ObjectPath("/app")), filter([:])])
        #expect(error?.name == "org.bluez.Error.Failed")
        #expect(error?.message == "No object received")
        let badArguments = await rig.client.error(
            adapterPath, Self.manager, "RegisterApplication", [.string("/app"), filter([:])])
        #expect(badArguments?.name == "org.freedesktop.DBus.Error.UnknownMethod")
    }

    @Test func invalidApplicationsFailAsBlueZDoes() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let service = TestGATTApplication.service("/app/s", uuid: "180D")
        let cases: [(String, [TestGATTApplication.Object], String)] = [
            ("empty", [], "No object received"),
            ("GAP", [TestGATTApplication.service("/app/s", uuid: "1800")], "Failed to create entry in database"),
            (
                "no Primary",
                [
                    TestGATTApplication.Object(
                        path: "/app/s", interface: "org.bluez.GattService1", properties: ["UUID": .string("180D")])
                ],
                "Failed to create entry in database"
            ),
            (
                "bad characteristic UUID",
                [
                    service,
                    TestGATTApplication.characteristic("/app/s/c", uuid: "2A3", service: "/app/s", flags: ["read"]),
                ],
                "Failed to create entry in database"
            ),
            // The structure is checked before the UUIDs.
            (
                "bad UUID and bad flag",
                [
                    TestGATTApplication.service("/app/s", uuid: "nope"),
                    TestGATTApplication.characteristic("/app/s/c", uuid: "2A37", service: "/app/s", flags: ["shout"]),
                ], "No valid service object found"
            ),
            (
                "unknown service",
                [
                    service,
                    TestGATTApplication.characteristic(
                        "/app/s/c", uuid: "2A37", service: "/app/other", flags: ["read"]),
                ],
                "No valid service object found"
            ),
            (
                "bad flag",
                [
                    service,
                    TestGATTApplication.characteristic("/app/s/c", uuid: "2A37", service: "/app/s", flags: ["shout"]),
                ],
                "No valid service object found"
            ),
            (
                "bad descriptor flag",
                [
                    service,
                    TestGATTApplication.characteristic("/app/s/c", uuid: "2A37", service: "/app/s", flags: ["read"]),
                    TestGATTApplication.descriptor(
                        "/app/s/c/d", uuid: "2901", characteristic: "/app/s/c", flags: ["notify"]),
                ], "No valid service object found"
            ),
        ]
        for (name, objects, message) in cases {
            let app = try await TestGATTApplication(address: rig.bluez.busAddress, objects: objects)
            defer { app.close() }
            let error = await app.registrationError()
            #expect(error?.name == "org.bluez.Error.Failed", "\(name)")
            #expect(error?.message == message, "\(name)")
        }
        #expect(rig.bluez.adapters[0].registeredApplications.isEmpty)
    }

    @Test func anApplicationIsDroppedWhenItsOwnerLeavesTheBus() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let app = try await TestGATTApplication.standard(address: rig.bluez.busAddress)
        try await app.register()
        let adapter = rig.bluez.adapters[0]
        #expect(adapter.registeredApplications.count == 1)
        app.close()
        try await waitUntil("the application is dropped") { adapter.registeredApplications.isEmpty }
        #expect(adapter.registeredApplications.isEmpty)
    }
}
