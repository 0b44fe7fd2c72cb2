import TestSupport
import Testing

@testable import DBus

/// `org.freedesktop.DBus.Properties` and `org.freedesktop.DBus.ObjectManager` on exported objects.
@Suite(.timeLimit(.minutes(5))) struct PropertiesTests {
    /// A server object at `/props` with a read-only, a read-write, a write-only and an absent property.
    struct Fixture {
        let bus: TestBus
        let server: DBusConnection
        let client: DBusConnection
        let volume = Locked<Int32>(5)

        init() async throws {
            bus = try TestBus()
            server = try await bus.connect("server")
            client = try await bus.connect("client")
            let volume = self.volume
            let interface = DBusInterface(
                testInterface,
                properties: [
                    DBusProperty("Name", "s", get: { .string("speaker") }),
                    DBusProperty(
                        "Volume", "i", get: { .int32(volume.value) },
                        set: { value throws(DBusError) in
                            guard let level = value.int32Value, (0...10).contains(level) else {
                                throw DBusError(.other("com.example.Error.OutOfRange"), "0...10")
                            }
                            volume.value = level
                        }),
                    DBusProperty("Secret", "s", get: nil, set: { _ in }),
                    DBusProperty("Absent", "s", get: { nil }),
                ])
            try await server.export([interface], at: ObjectPath("/props"))
        }

        func properties(_ member: MemberName, _ arguments: [DBusValue]) async throws(DBusError) -> [DBusValue] {
            try await client.call(
                destination: server.uniqueName, path: ObjectPath(trusted: "/props"), interface: .properties,
                member: member, arguments: arguments)
        }

        func errorCode(_ member: MemberName, _ arguments: [DBusValue]) async -> DBusError.Code? {
            do {
                _ = try await properties(member, arguments)
                return nil
            } catch { return error.code }
        }
    }

    let iface = DBusValue.string(testInterface.rawValue)

    @Test func getAndGetAll() async throws {
        let fixture = try await Fixture()
        #expect(try await fixture.properties("Get", [iface, .string("Name")]) == [.variant(.string("speaker"))])
        #expect(try await fixture.properties("Get", [iface, .string("Volume")]) == [.variant(.int32(5))])
        let all = try await fixture.properties("GetAll", [iface])
        // Write-only and absent properties are left out.
        #expect(all == [.stringVariantDictionary(["Name": .string("speaker"), "Volume": .int32(5)])])
    }

    @Test func setStoresTheValue() async throws {
        let fixture = try await Fixture()
        #expect(try await fixture.properties("Set", [iface, .string("Volume"), .variant(.int32(9))]) == [])
        #expect(fixture.volume.value == 9)
        #expect(try await fixture.properties("Get", [iface, .string("Volume")]) == [.variant(.int32(9))])
        // The setter's own error goes back to the caller.
        #expect(
            await fixture.errorCode("Set", [iface, .string("Volume"), .variant(.int32(11))])
                == .other("com.example.Error.OutOfRange"))
        #expect(fixture.volume.value == 9)
    }

    @Test func readOnlyWrongTypeAndUnknownAreRefused() async throws {
        let fixture = try await Fixture()
        #expect(await fixture.errorCode("Set", [iface, .string("Name"), .variant(.string("x"))]) == .propertyReadOnly)
        #expect(await fixture.errorCode("Set", [iface, .string("Volume"), .variant(.string("loud"))]) == .invalidArgs)
        #expect(await fixture.errorCode("Set", [iface, .string("Volume"), .variant(.uint32(3))]) == .invalidArgs)
        #expect(
            await fixture.errorCode("Set", [iface, .string("Volume"), .variant(.variant(.int32(3)))]) == .invalidArgs)
        #expect(await fixture.errorCode("Set", [iface, .string("Nope"), .variant(.int32(1))]) == .unknownProperty)
        #expect(await fixture.errorCode("Get", [iface, .string("Nope")]) == .unknownProperty)
        #expect(await fixture.errorCode("Get", [iface, .string("Absent")]) == .unknownProperty)
        #expect(await fixture.errorCode("Get", [iface, .string("Secret")]) == .accessDenied)
        #expect(await fixture.errorCode("Get", [.string("com.example.Missing"), .string("Name")]) == .unknownInterface)
        #expect(await fixture.errorCode("GetAll", [.string("com.example.Missing")]) == .unknownInterface)
        // Wrong argument signatures and unknown Properties methods.
        #expect(await fixture.errorCode("Get", [iface]) == .invalidArgs)
        #expect(await fixture.errorCode("Set", [iface, .string("Volume"), .int32(3)]) == .invalidArgs)
        #expect(await fixture.errorCode("GetAll", [.int32(1)]) == .invalidArgs)
        #expect(await fixture.errorCode("Delete", [iface]) == .unknownMethod)
        // Nothing above changed the stored value or the object.
        #expect(fixture.volume.value == 5)
        #expect(try await fixture.properties("Get", [iface, .string("Name")]) == [.variant(.string("speaker"))])
    }

    @Test func writeOnlyPropertyCanBeSet() async throws {
        let fixture = try await Fixture()
        #expect(try await fixture.properties("Set", [iface, .string("Secret"), .variant(.string("s3"))]) == [])
    }

    // MARK: ObjectManager

    @Test func objectManagerReportsAndAnnouncesObjects() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.addObjectManager(at: path("/app"))
        let added = Collected<[DBusValue]>()
        let removed = Collected<[DBusValue]>()
        let subscriptions = [
            try await client.subscribe(
                DBusMatchRule(sender: server.uniqueName, interface: .objectManager, member: "InterfacesAdded")
            ) { added.append((try? $0.arguments()) ?? []) },
            try await client.subscribe(
                DBusMatchRule(sender: server.uniqueName, interface: .objectManager, member: "InterfacesRemoved")
            ) { removed.append((try? $0.arguments()) ?? []) },
        ]
        func managedObjects() async throws -> [DBusValue.DictionaryEntry] {
            let reply = try await client.call(
                destination: server.uniqueName, path: path("/app"), interface: .objectManager,
                member: "GetManagedObjects")
            #expect(reply.first?.signature == "a{oa{sa{sv}}}")
            return try #require(reply.first?.dictionaryEntries)
        }
        #expect(try await managedObjects().isEmpty)

        let battery = DBusInterface(
            "org.bluez.Battery1", properties: [DBusProperty("Percentage", "y", get: { .byte(80) })])
        let device = DBusInterface("org.bluez.Device1", properties: [DBusProperty("Name", "s", get: { .string("d") })])
        try await server.export([device, battery], at: path("/app/dev0"))
        // Outside the manager: neither reported nor announced.
        try await server.export([device], at: path("/elsewhere"))
        try await waitUntil("InterfacesAdded arrived") { added.count == 1 }
        let announcement = try #require(added.values.first)
        #expect(announcement.first == .objectPath(try path("/app/dev0")))
        let interfaces = announcement.last?.stringKeyedDictionary
        #expect(interfaces?.keys.sorted() == ["org.bluez.Battery1", "org.bluez.Device1"])
        #expect(interfaces?["org.bluez.Battery1"]?.stringKeyedDictionary?["Percentage"]?.byteValue == 80)

        let objects = try await managedObjects()
        #expect(objects.map(\.key) == [.objectPath(try path("/app/dev0"))])
        #expect(objects.first?.value == announcement.last)

        server.unexport(try path("/app/dev0"))
        try await waitUntil("InterfacesRemoved arrived") { removed.count == 1 }
        let gone: [DBusValue] = [
            .objectPath(try path("/app/dev0")), .stringArray(["org.bluez.Device1", "org.bluez.Battery1"]),
        ]
        #expect(removed.values.first == gone)
        #expect(try await managedObjects().isEmpty)
        #expect(added.count == 1)

        server.removeObjectManager(at: try path("/app"))
        let error = await #expect(throws: DBusError.self) { try await managedObjects() }
        #expect(error?.code == .unknownObject)
        withExtendedLifetime(subscriptions) {}
    }

    @Test func emitPropertiesChangedReachesSubscribers() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let got = Collected<DBusMessage>()
        let subscription = try await client.subscribe(
            DBusMatchRule(sender: server.uniqueName, path: try path("/props"), interface: .properties)
        ) { got.append($0) }
        server.emitPropertiesChanged(
            path: try path("/props"), interface: testInterface, changed: ["Volume": .int32(3)], invalidated: ["Name"])
        server.emitPropertiesChanged(
            path: try path("/props"), interface: testInterface, changed: ["Value": .bytes([1, 2])])
        try await waitUntil("both PropertiesChanged arrived") { got.count == 2 }
        let first = try #require(got.values.first)
        #expect(first.isPropertiesChanged)
        let expected = PropertiesChange(
            interface: testInterface.rawValue, changed: ["Volume": .int32(3)], invalidated: ["Name"])
        #expect(first.propertiesChange() == expected)
        #expect(first.propertiesChangedValueBytes(of: testInterface) == nil)
        #expect(got.values[1].propertiesChangedValueBytes(of: testInterface) == [1, 2])
        subscription.cancel()
    }
}
