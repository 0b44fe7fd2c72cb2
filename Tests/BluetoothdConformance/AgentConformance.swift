import DBus
import TestSupport
public import Testing

/// bluetoothd's default agent (`src/agent.c`, 5.51 and later: a queue of default agents).
///
/// The first agent registered with `AgentManager1.RegisterAgent` becomes the default ("Default
/// agent set to <owner> <path>" in bluetoothd's debug log); when it unregisters, the next one
/// registered takes over; `RequestDefaultAgent` moves an agent to the head; the last one leaving
/// clears the default ("Default agent cleared"). bluetoothd keys agents by connection: a second
/// `RegisterAgent` from one connection answers `org.bluez.Error.AlreadyExists`, and
/// `UnregisterAgent` of a path it does not know answers `org.bluez.Error.DoesNotExist`.
public enum AgentConformance {
    static let manager = "/org/bluez"
    static let interface = "org.bluez.AgentManager1"

    /// Runs the sequence with two agents on two connections. Needs ``BluetoothdUnderTest/defaultAgentLog``
    /// (records an issue without it) and no other agent registered.
    public static func run(_ bluetoothd: BluetoothdUnderTest, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        guard let log = bluetoothd.defaultAgentLog else {
            Issue.record("\(bluetoothd) gives no default-agent log", sourceLocation: sourceLocation)
            return
        }
        let first = try await BlueZCalls.open(bluetoothd, label: "conformance.agent1")
        defer { first.close() }
        let second = try await BlueZCalls.open(bluetoothd, label: "conformance.agent2")
        defer { second.close() }
        let firstPath = "/conformance/agent1"
        let secondPath = "/conformance/agent2"
        try await exportAgent(first, at: firstPath)
        try await exportAgent(second, at: secondPath)
        let setTo = { (client: BlueZCalls, path: String) in "Default agent set to \(client.uniqueName) \(path)" }

        var mark = try await log().count
        /// Waits until the log has `expected` after the mark (exactly, in order), then moves the mark.
        func expectLog(_ expected: [String], _ step: String) async throws {
            var lines: [String] = []
            let complete = try await BlueZCalls.holds(within: .seconds(10)) {
                lines = try await log().dropFirst(mark).map { String($0) }
                return lines.count >= expected.count
            }
            // Later lines that should not be there come in the same turn: read once more.
            lines = try await log().dropFirst(mark).map { String($0) }
            #expect(
                complete && lines.count == expected.count
                    && zip(lines, expected).allSatisfy { $0.hasSuffix($1) || $0.contains($1) },
                "\(bluetoothd), \(step): expected \(expected), logged \(lines)", sourceLocation: sourceLocation)
            mark += lines.count
        }

        try await register(first, firstPath)
        try await expectLog([setTo(first, firstPath)], "first RegisterAgent")
        try await register(second, secondPath)
        // The second one queues behind: no new default. Checked with the next step's lines.

        let twice = await second.error(
            manager, interface, "RegisterAgent", [.objectPath(try ObjectPath(secondPath)), .string("")])
        #expect(
            twice?.name == "org.bluez.Error.AlreadyExists", "\(bluetoothd): \(String(describing: twice))",
            sourceLocation: sourceLocation)
        let unknown = await second.error(
            manager, interface, "UnregisterAgent", [.objectPath(try ObjectPath("/conformance/none"))])
        #expect(
            unknown?.name == "org.bluez.Error.DoesNotExist", "\(bluetoothd): \(String(describing: unknown))",
            sourceLocation: sourceLocation)

        try await first.call(manager, interface, "UnregisterAgent", [.objectPath(ObjectPath(firstPath))])
        try await expectLog([setTo(second, secondPath)], "the default unregistered: the next takes over")

        try await register(first, firstPath)
        try await first.call(manager, interface, "RequestDefaultAgent", [.objectPath(ObjectPath(firstPath))])
        try await expectLog([setTo(first, firstPath)], "RequestDefaultAgent moves it to the head")

        try await first.call(manager, interface, "UnregisterAgent", [.objectPath(ObjectPath(firstPath))])
        try await expectLog([setTo(second, secondPath)], "the head unregistered again")
        try await second.call(manager, interface, "UnregisterAgent", [.objectPath(ObjectPath(secondPath))])
        try await expectLog(["Default agent cleared"], "the last one left")
    }

    private static func register(_ client: BlueZCalls, _ path: String) async throws {
        try await client.call(manager, interface, "RegisterAgent", [.objectPath(ObjectPath(path)), .string("")])
    }

    /// An `org.bluez.Agent1` that answers `Release` and `Cancel`, refuses PIN codes and
    /// passkeys, and refuses (or, with `accepting`, accepts) confirmations and authorizations.
    static func exportAgent(_ client: BlueZCalls, at path: String, accepting: Bool = false) async throws {
        let answer = { (name: MemberName, signature: DBusSignature) in
            DBusMethod(name, in: signature) { invocation in
                if accepting { return invocation.reply() }
                invocation.reply(error: DBusError(name: "org.bluez.Error.Rejected", message: "conformance agent"))
            }
        }
        let refused = { (name: MemberName, signature: DBusSignature, out: DBusSignature) in
            DBusMethod(name, in: signature, out: out) { invocation in
                invocation.reply(error: DBusError(name: "org.bluez.Error.Rejected", message: "conformance agent"))
            }
        }
        try await client.connection.export(
            [
                DBusInterface(
                    "org.bluez.Agent1",
                    methods: [
                        DBusMethod("Release") { $0.reply() }, DBusMethod("Cancel") { $0.reply() },
                        refused("RequestPinCode", "o", "s"), refused("RequestPasskey", "o", "u"),
                        answer("RequestConfirmation", "ou"), answer("RequestAuthorization", "o"),
                        answer("AuthorizeService", "os"),
                    ])
            ], at: ObjectPath(path))
    }
}
