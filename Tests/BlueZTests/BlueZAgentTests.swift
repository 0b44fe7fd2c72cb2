import BlueZ
import DBus
import Locking
import Testing

/// `BlueZAgent` through a private dbus-daemon, with a stand-in bluetoothd: a second connection
/// that owns `org.bluez`, serves a minimal `AgentManager1` at `/org/bluez` recording what it is
/// asked, and calls the agent's methods as bluetoothd does.
@Suite(.timeLimit(.minutes(5))) struct BlueZAgentTests {
    @Test func registersNoInputNoOutputAndRequestsDefaultWhenAsked() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register(requestDefault: true)
        let sender = try #require(bus.app.uniqueName)
        #expect(
            bus.manager.calls == [
                .init(
                    member: "RegisterAgent", arguments: [.objectPath(agent.path), .string("NoInputNoOutput")],
                    sender: sender),
                .init(member: "RequestDefaultAgent", arguments: [.objectPath(agent.path)], sender: sender),
            ])
        #expect(agent.isRegistered)
        #expect(agent.isDefault)
        #expect(agent.path.rawValue.hasPrefix("/org/bluezkit/agent"))
        #expect(BlueZAgent(connection: bus.app).path != agent.path)
    }

    /// Just works needs `RequestAuthorization` only: a numeric comparison or a service
    /// authorization without anyone to ask is refused.
    @Test func answersOnlyWhatJustWorksNeeds() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        let device = DBusValue.objectPath(try ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24"))
        let accepted: [(MemberName, [DBusValue])] = [
            ("RequestAuthorization", [device]),
            ("DisplayPasskey", [device, .uint32(123_456), .uint16(0)]),
            ("Cancel", []),
        ]
        for (member, arguments) in accepted {
            #expect(try await bus.callAgent(agent, member, arguments) == [], "\(member)")
        }
        let rejected: [(MemberName, [DBusValue])] = [
            ("RequestConfirmation", [device, .uint32(123_456)]),
            ("AuthorizeService", [device, .string("0000180d-0000-1000-8000-00805f9b34fb")]),
            ("RequestPinCode", [device]),
            ("RequestPasskey", [device]),
            ("DisplayPinCode", [device, .string("0000")]),
        ]
        for (member, arguments) in rejected {
            let error = await #expect(throws: DBusError.self, "\(member)") {
                try await bus.callAgent(agent, member, arguments)
            }
            #expect(error?.name == "org.bluez.Error.Rejected", "\(member)")
        }
    }

    @Test func onlyBluetoothdMayCallTheAgent() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        let intruder = try await bus.connect("intruder")
        let error = await #expect(throws: DBusError.self) {
            try await intruder.call(
                destination: bus.app.uniqueName, path: agent.path, interface: "org.bluez.Agent1",
                member: "RequestAuthorization",
                arguments: [.objectPath(try ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24"))])
        }
        #expect(error?.code == .accessDenied)
    }

    @Test func anotherAgentOnTheConnectionIsNotAnError() async throws {
        let bus = try await AgentTestBus()
        bus.manager.fail("RegisterAgent", with: "org.bluez.Error.AlreadyExists")
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        #expect(!agent.isRegistered)
        #expect(bus.manager.calls.map(\.member) == ["RegisterAgent"])
        await agent.unregister()
        #expect(bus.manager.calls.map(\.member) == ["RegisterAgent"])
    }

    /// bluetoothd keeps every registered agent in line to become the default: one refused as
    /// the default must not stay registered, waiting for the agents before it to leave.
    @Test func aRefusedDefaultIsNotAnErrorAndUnregisters() async throws {
        let bus = try await AgentTestBus()
        bus.manager.fail("RequestDefaultAgent", with: "org.bluez.Error.Failed")
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register(requestDefault: true)
        #expect(bus.manager.calls.map(\.member) == ["RegisterAgent", "RequestDefaultAgent", "UnregisterAgent"])
        #expect(bus.manager.calls.last?.arguments == [.objectPath(agent.path)])
        #expect(!agent.isRegistered)
        #expect(!agent.isDefault)
        // The object is gone too: bluetoothd cannot reach it.
        let device = DBusValue.objectPath(try ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_23"))
        await #expect(throws: DBusError.self) { try await bus.callAgent(agent, "RequestAuthorization", [device]) }
    }

    /// The default agent decides pairings for every program: never asked for unless wanted.
    @Test func registersWithoutBecomingTheDefaultUnlessAsked() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        #expect(bus.manager.calls.map(\.member) == ["RegisterAgent"])
        #expect(agent.isRegistered && !agent.isDefault)
    }

    @Test func failsWithoutBluetoothdAndLeavesNoObject() async throws {
        let bus = try await AgentTestBus(withBluetoothd: false)
        let agent = BlueZAgent(connection: bus.app)
        let error = await #expect(throws: BlueZError.self) { try await agent.register() }
        #expect(error?.code == .serviceAbsent)
        #expect(error?.underlying?.code == .serviceUnknown)
        #expect(!agent.isRegistered)
        let probe = try await bus.connect("probe")
        let gone = await #expect(throws: DBusError.self) {
            try await probe.call(
                destination: bus.app.uniqueName, path: agent.path, interface: "org.bluez.Agent1", member: "Cancel")
        }
        #expect(gone?.code == .unknownObject)
    }

    @Test func unregisterUnregistersAndRemovesTheObject() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register(requestDefault: true)
        await agent.unregister()
        #expect(bus.manager.calls.last?.member == "UnregisterAgent")
        #expect(bus.manager.calls.last?.arguments == [.objectPath(agent.path)])
        #expect(!agent.isRegistered)
        let error = await #expect(throws: DBusError.self) { try await bus.callAgent(agent, "Cancel", []) }
        #expect(error?.code == .unknownObject)
        await agent.unregister()  // twice: nothing more
        #expect(bus.manager.calls.map(\.member) == ["RegisterAgent", "RequestDefaultAgent", "UnregisterAgent"])
    }

    @Test func releasedAgentIsNotUnregisteredAgain() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        #expect(try await bus.callAgent(agent, "Release", []) == [])
        #expect(!agent.isRegistered)
        await agent.unregister()
        #expect(!bus.manager.calls.map(\.member).contains("UnregisterAgent"))
    }

    @Test func registersAgainAfterUnregistering() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register(requestDefault: true)
        await agent.unregister()
        try await agent.register(requestDefault: true)
        #expect(agent.isRegistered && agent.isDefault)
        let device = DBusValue.objectPath(try ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24"))
        #expect(try await bus.callAgent(agent, "RequestAuthorization", [device]) == [])
    }
}

/// A private bus with the app's connection and, unless told otherwise, a stand-in bluetoothd.
final class AgentTestBus: Sendable {
    let daemon: PrivateBusDaemon
    let app: DBusConnection
    let bluetoothd: DBusConnection
    let manager = FakeAgentManager()
    private let opened = PosixMutex<[DBusConnection]>([])

    init(withBluetoothd: Bool = true) async throws {
        daemon = try PrivateBusDaemon()
        app = try await DBusConnection.open(address: daemon.address, label: "app")
        bluetoothd = try await DBusConnection.open(address: daemon.address, label: "bluetoothd")
        if withBluetoothd {
            try await bluetoothd.export([manager.interface], at: ObjectPath("/org/bluez"))
            let reply = try await bluetoothd.requestName("org.bluez")
            #expect(reply == .primaryOwner)
        }
    }

    func connect(_ label: String) async throws -> DBusConnection {
        let connection = try await DBusConnection.open(address: daemon.address, label: label)
        opened.withLock { $0.append(connection) }
        return connection
    }

    /// Calls `member` of the agent's `Agent1` as bluetoothd (the owner of `org.bluez`).
    @discardableResult
    func callAgent(_ agent: BlueZAgent, _ member: MemberName, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await bluetoothd.call(
            destination: app.uniqueName, path: agent.path, interface: "org.bluez.Agent1", member: member,
            arguments: arguments)
    }

    deinit {
        for connection in opened.withLock({ $0 }) + [app, bluetoothd] { connection.close() }
        daemon.stop()
    }
}

/// `org.bluez.AgentManager1` as far as the agent uses it: records each call and answers
/// with success or the error set for its member.
final class FakeAgentManager: Sendable {
    struct Call: Equatable, Sendable {
        var member: String
        var arguments: [DBusValue]
        var sender: BusName?
    }

    private final class Storage: Sendable {
        let mutex = PosixMutex<(calls: [Call], errors: [String: String])>(([], [:]))
    }
    private let storage = Storage()
    var calls: [Call] { storage.mutex.withLock { $0.calls } }

    /// Answers `member` with the error `name` from now on.
    func fail(_ member: String, with name: String) { storage.mutex.withLock { $0.errors[member] = name } }

    var interface: DBusInterface {
        let storage = storage
        func method(_ name: MemberName, _ signature: DBusSignature) -> DBusMethod {
            DBusMethod(name, in: signature) { invocation in
                let arguments = (try? invocation.arguments()) ?? []
                let error = storage.mutex.withLock { state in
                    state.calls.append(Call(member: name.rawValue, arguments: arguments, sender: invocation.sender))
                    return state.errors[name.rawValue]
                }
                if let error {
                    invocation.reply(error: DBusError(name: error, message: "as told"))
                } else {
                    invocation.reply()
                }
            }
        }
        return DBusInterface(
            "org.bluez.AgentManager1",
            methods: [
                method("RegisterAgent", "os"), method("UnregisterAgent", "o"), method("RequestDefaultAgent", "o"),
            ])
    }
}
