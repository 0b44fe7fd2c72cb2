import TestSupport
import Testing

@testable import DBus

/// Exported objects: deferred and dropped answers, introspection, subtrees,
/// callers restricted by name, and calls back into the caller before replying.
@Suite(.timeLimit(.minutes(5))) struct ExportTests {
    @Test func deferredReplyIsAnsweredFromAnotherTask() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let held = Collected<DBusMethodInvocation>()
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Later", in: "s", out: "s") { held.append($0) }])],
            at: path("/deferred"))
        let call = Task {
            try await client.call(
                destination: server.uniqueName, path: path("/deferred"), interface: testInterface, member: "Later",
                arguments: [.string("ping")])
        }
        try await waitUntil("the handler stored the invocation") { held.count == 1 }
        let invocation = try #require(held.values.first)
        #expect(invocation.sender == client.uniqueName)
        #expect(invocation.path == (try path("/deferred")))
        #expect(!invocation.isAnswered)
        // Answered off the connection's queue, from a detached task.
        await Task.detached {
            let text = (try? invocation.arguments())?.first?.stringValue ?? "?"
            invocation.reply([.string(text + " pong")])
        }.value
        #expect(invocation.isAnswered)
        #expect(try await call.value == [.string("ping pong")])
    }

    @Test func droppedInvocationFailsTheCallPromptly() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let ran = Collected<Bool>()
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Forget") { _ in ran.append(true) }])],
            at: path("/forget"))
        // The timeout is far longer than the test may take: only the Failed reply ends this call.
        let error = await #expect(throws: DBusError.self) {
            try await client.call(
                destination: server.uniqueName, path: path("/forget"), interface: testInterface, member: "Forget",
                timeout: .seconds(20))
        }
        #expect(error?.code == .failed)
        #expect(ran.count == 1)
    }

    @Test func secondAnswerIsIgnored() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let answeredTwice = Collected<Bool>()
        try await server.export(
            [
                DBusInterface(
                    testInterface,
                    methods: [
                        DBusMethod("Twice", out: "s") { invocation in
                            invocation.reply([.string("first")])
                            answeredTwice.append(invocation.isAnswered)
                            invocation.reply([.string("second")])
                            invocation.reply(error: DBusError(.failed, "third"))
                        }
                    ])
            ],
            at: path("/twice"))
        for _ in 0..<3 {
            let reply = try await client.call(
                destination: server.uniqueName, path: path("/twice"), interface: testInterface, member: "Twice")
            #expect(reply == [.string("first")])
        }
        // Extra replies did not disturb the caller's next calls: each got the first answer. The
        // handler notes `isAnswered` after its first reply went out, so the caller can be back first.
        try await waitUntil("the handler ran three times") { answeredTwice.count == 3 }
        #expect(answeredTwice.values == [true, true, true])
    }

    @Test func introspectionNamesInterfacesMembersAndChildren() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let interface = DBusInterface(
            testInterface,
            methods: [DBusMethod("Add", in: "ii", out: "i") { $0.reply([.int32(0)]) }],
            properties: [DBusProperty("Label", "s", get: { .string("l") })],
            signals: [DBusSignalDescription("Changed", "a{sv}")])
        try await server.export([interface], at: path("/app/thing"))
        try await server.export([DBusInterface("com.example.Other")], at: path("/app/other/leaf"))
        try await server.addObjectManager(at: path("/app"))

        func introspect(_ at: String) async throws -> String {
            let reply = try await client.call(
                destination: server.uniqueName, path: path(at), interface: .introspectable, member: "Introspect")
            return try #require(reply.first?.stringValue)
        }
        let thing = try await introspect("/app/thing")
        #expect(thing.contains("<interface name=\"com.example.Test\">"))
        #expect(thing.contains("<method name=\"Add\">"))
        #expect(thing.contains("<arg type=\"i\" direction=\"in\"/>"))
        #expect(thing.contains("<arg type=\"i\" direction=\"out\"/>"))
        #expect(thing.contains("<property name=\"Label\" type=\"s\" access=\"read\"/>"))
        #expect(thing.contains("<signal name=\"Changed\">"))
        #expect(thing.contains("<interface name=\"org.freedesktop.DBus.Properties\">"))
        #expect(thing.contains("<interface name=\"org.freedesktop.DBus.Introspectable\">"))
        #expect(!thing.contains("<node name="))

        let app = try await introspect("/app")
        #expect(app.contains("<interface name=\"org.freedesktop.DBus.ObjectManager\">"))
        #expect(app.contains("<node name=\"thing\"/>"))
        #expect(app.contains("<node name=\"other\"/>"))
        #expect(!app.contains("com.example.Test"))

        let root = try await introspect("/")
        #expect(root.contains("<node name=\"app\"/>"))
        #expect(try await introspect("/app/other").contains("<node name=\"leaf\"/>"))

        let error = await #expect(throws: DBusError.self) { try await introspect("/nothing") }
        #expect(error?.code == .unknownObject)
    }

    @Test func peerInterfaceAnswers() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.export([DBusInterface(testInterface)], at: path("/p"))
        #expect(
            try await client.call(destination: server.uniqueName, path: path("/p"), interface: .peer, member: "Ping")
                == [])
        let id = try await client.call(
            destination: server.uniqueName, path: path("/p"), interface: .peer, member: "GetMachineId")
        #expect(id.first?.stringValue?.isEmpty == false)
    }

    @Test func subtreeGetsEveryPathBelowItsPrefix() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.exportSubtree(at: path("/tree")) { invocation in
            invocation.reply([
                .objectPath(invocation.path ?? .root), .string(invocation.message.member?.rawValue ?? ""),
            ])
        }
        // An object of its own takes precedence over the subtree.
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Who", out: "s") { $0.reply([.string("object")]) }])],
            at: path("/tree/own"))
        func who(_ at: String) async throws -> [DBusValue] {
            try await client.call(
                destination: server.uniqueName, path: path(at), interface: testInterface, member: "Who")
        }
        #expect(try await who("/tree") == [.objectPath(try path("/tree")), .string("Who")])
        #expect(try await who("/tree/a/b/c") == [.objectPath(try path("/tree/a/b/c")), .string("Who")])
        #expect(try await who("/tree/own") == [.string("object")])
        let outside = await #expect(throws: DBusError.self) { try await who("/treehouse") }
        #expect(outside?.code == .unknownObject)
        server.unexportSubtree(at: try path("/tree"))
        let gone = await #expect(throws: DBusError.self) { try await who("/tree/a") }
        #expect(gone?.code == .unknownObject)
    }

    @Test func unexportedObjectsAreUnknown() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Ping") { $0.reply() }])], at: path("/gone"))
        #expect(
            try await client.call(
                destination: server.uniqueName, path: path("/gone"), interface: testInterface, member: "Ping")
                == [])
        server.unexport(try path("/gone"))
        let error = await #expect(throws: DBusError.self) {
            try await client.call(
                destination: server.uniqueName, path: path("/gone"), interface: testInterface, member: "Ping")
        }
        #expect(error?.code == .unknownObject)
    }

    @Test func allowedCallerByUniqueName() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let allowed = try await bus.connect("allowed")
        let stranger = try await bus.connect("stranger")
        let pingMethod = DBusMethod("Ping", out: "s") { $0.reply([.string("pong")]) }
        try await server.export(
            [DBusInterface(testInterface, methods: [pingMethod])], at: path("/guarded"),
            allowedCaller: allowed.uniqueName)
        func ping(from caller: DBusConnection, interface: InterfaceName = testInterface, member: MemberName = "Ping")
            async throws -> [DBusValue]
        {
            try await caller.call(
                destination: server.uniqueName, path: path("/guarded"), interface: interface, member: member)
        }
        #expect(try await ping(from: allowed) == [.string("pong")])
        let denied = await #expect(throws: DBusError.self) { try await ping(from: stranger) }
        #expect(denied?.code == .accessDenied)
        // The standard interfaces are guarded too.
        let introspect = await #expect(throws: DBusError.self) {
            try await ping(from: stranger, interface: .introspectable, member: "Introspect")
        }
        #expect(introspect?.code == .accessDenied)
        let getAll = await #expect(throws: DBusError.self) {
            try await stranger.call(
                destination: server.uniqueName, path: path("/guarded"), interface: .properties, member: "GetAll",
                arguments: [.string(testInterface.rawValue)])
        }
        #expect(getAll?.code == .accessDenied)
    }

    @Test func allowedCallerByWellKnownNameFollowsTheOwner() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let first = try await bus.connect("first")
        let second = try await bus.connect("second")
        let name: BusName = "org.example.Trusted"
        let pingMethod = DBusMethod("Ping", out: "s") { $0.reply([.string("pong")]) }
        // Exported before anyone owns the name: nobody may call.
        try await server.export(
            [DBusInterface(testInterface, methods: [pingMethod])], at: path("/guarded"), allowedCaller: name)
        try await server.addObjectManager(at: path("/"), allowedCaller: name)
        func ping(from caller: DBusConnection) async throws(DBusError) -> [DBusValue] {
            try await caller.call(
                destination: server.uniqueName, path: ObjectPath(trusted: "/guarded"), interface: testInterface,
                member: "Ping")
        }
        func code(_ body: () async throws -> [DBusValue]) async -> DBusError.Code? {
            do {
                _ = try await body()
                return nil
            } catch { return (error as? DBusError)?.code }
        }
        #expect(await code { try await ping(from: first) } == .accessDenied)

        #expect(try await first.requestName(name) == .primaryOwner)
        #expect(try await ping(from: first) == [.string("pong")])
        #expect(await code { try await ping(from: second) } == .accessDenied)
        let managed = try await first.call(
            destination: server.uniqueName, path: path("/"), interface: .objectManager, member: "GetManagedObjects")
        #expect(managed.first?.dictionaryEntries?.count == 1)

        #expect(try await first.releaseName(name))
        #expect(try await second.requestName(name) == .primaryOwner)
        #expect(try await ping(from: second) == [.string("pong")])
        #expect(await code { try await ping(from: first) } == .accessDenied)
    }

    @Test func callBackIntoTheCallerBeforeReplying() async throws {
        // What BlueZ's RegisterApplication does: the registrar calls the
        // application's GetManagedObjects and answers Register only then.
        let bus = try TestBus()
        let application = try await bus.connect("application")
        let registrar = try await bus.connect("registrar")
        let characteristic = DBusInterface(
            "org.bluez.GattCharacteristic1",
            properties: [
                DBusProperty("UUID", "s", get: { .string("00002a37-0000-1000-8000-00805f9b34fb") }),
                DBusProperty("Flags", "as", get: { .stringArray(["notify"]) }),
            ])
        try await application.addObjectManager(at: path("/app"))
        try await application.export([characteristic], at: path("/app/service0/char0"))

        let register = DBusMethod("RegisterApplication", in: "oa{sv}") { invocation in
            guard let sender = invocation.sender, let root = (try? invocation.arguments())?.first?.objectPathValue
            else {
                return invocation.reply(error: DBusError(.invalidArgs, "no application"))
            }
            Task {
                do {
                    let objects = try await registrar.call(
                        destination: sender, path: root, interface: .objectManager, member: "GetManagedObjects")
                    let entries = objects.first?.dictionaryEntries ?? []
                    invocation.reply([.uint32(UInt32(entries.count)), objects.first ?? .stringArray([])])
                } catch let error as DBusError {
                    invocation.reply(error: error)
                } catch {
                    invocation.reply(error: DBusError(.failed, "\(error)"))
                }
            }
        }
        try await registrar.export(
            [DBusInterface("org.bluez.GattManager1", methods: [register])], at: path("/org/bluez/hci0"))

        let reply = try await application.call(
            destination: registrar.uniqueName, path: path("/org/bluez/hci0"), interface: "org.bluez.GattManager1",
            member: "RegisterApplication", arguments: [.objectPath(try path("/app")), .stringVariantDictionary([:])])
        #expect(reply.first == .uint32(1))
        let entry = try #require(reply.last?.dictionaryEntries?.first)
        #expect(entry.key == .objectPath(try path("/app/service0/char0")))
        let properties = entry.value.stringKeyedDictionary?["org.bluez.GattCharacteristic1"]?.stringKeyedDictionary
        #expect(properties?["UUID"]?.stringValue == "00002a37-0000-1000-8000-00805f9b34fb")
        #expect(properties?["Flags"]?.stringArrayValue == ["notify"])
    }
}
