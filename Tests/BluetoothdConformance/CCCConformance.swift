import DBus
import TestSupport
public import Testing

/// What a GATT application sees of a central's subscription across a link loss.
///
/// bluetoothd keeps the Client Characteristic Configuration of a central that is not bonded for
/// the link's life only (`src/gatt-database.c`, `att_disconnected` → `clear_ccc_state`): when
/// the link goes, the application gets `StopNotify` (it was the last subscriber), and when the
/// central subscribes again on a new link, `StartNotify` again. (A bonded central's CCC is kept:
/// one `StartNotify` in all: ``runBonded(_:peer:sourceLocation:)``.)
public enum CCCConformance {
    /// Registers our application on `bluetoothd`'s adapter; `peer` connects as a central,
    /// subscribes, loses the link, connects and subscribes again.
    public static func runUnbonded(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let application = try await ConformanceApplication.register(on: bluetoothd)
        do {
            try await steps(bluetoothd, peer, application, sourceLocation)
        } catch {
            await application.unregister()
            throw error
        }
        await application.unregister()
    }

    /// As ``runUnbonded(_:peer:sourceLocation:)``, but the central bonds first (our side answers
    /// as bluetoothd's default agent): bluetoothd keeps a bonded central's CCC across the link
    /// loss, so the application sees one `StartNotify` in all, and no `StopNotify`.
    public static func runBonded(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let agent = try await BlueZCalls.open(bluetoothd, label: "conformance.ccc-agent")
        defer { agent.close() }
        // NoInputNoOutput: just works on both sides (hci1 without an agent of its own gets the default).
        let agentPath = "/conformance/ccc/agent"
        try await AgentConformance.exportAgent(agent, at: agentPath, accepting: true)
        let path = DBusValue.objectPath(try ObjectPath(agentPath))
        try await agent.call(
            AgentConformance.manager, AgentConformance.interface, "RegisterAgent", [path, .string("NoInputNoOutput")])
        try await agent.call(AgentConformance.manager, AgentConformance.interface, "RequestDefaultAgent", [path])
        let application = try await ConformanceApplication.register(on: bluetoothd)
        do {
            try await bondedSteps(bluetoothd, peer, application, sourceLocation)
        } catch {
            await application.unregister()
            throw error
        }
        await application.unregister()
        _ = await agent.error(AgentConformance.manager, AgentConformance.interface, "UnregisterAgent", [path])
    }

    private static func bondedSteps(
        _ bluetoothd: BluetoothdUnderTest, _ peer: some ConformancePeer, _ application: ConformanceApplication,
        _ sourceLocation: SourceLocation
    ) async throws {
        let service = ConformanceApplication.service
        let characteristic = ConformanceApplication.characteristic
        try await peer.connectAsCentral()
        try await peer.pairAsCentral()
        try await peer.subscribe(service: service, characteristic: characteristic)
        let diagnostics = { "\(bluetoothd): \(application.notifyCalls)" }
        try await pollUntil(
            "subscribed", timeout: .seconds(30), diagnostics: diagnostics, sourceLocation: sourceLocation
        ) {
            !application.notifyCalls.isEmpty
        }
        try await peer.disconnectAsCentral()
        try await peer.connectAsCentral()
        try await peer.subscribe(service: service, characteristic: characteristic)
        // Nothing more should come: wait as long as the peer's absence wait for a call that would.
        let more = try await BlueZCalls.holds(within: peer.absenceWait) { application.notifyCalls.count > 1 }
        #expect(
            !more && application.notifyCalls == ["StartNotify"],
            "\(bluetoothd), a bonded central across a link loss: \(application.notifyCalls)",
            sourceLocation: sourceLocation)
        try await peer.disconnectAsCentral()
    }

    private static func steps(
        _ bluetoothd: BluetoothdUnderTest, _ peer: some ConformancePeer, _ application: ConformanceApplication,
        _ sourceLocation: SourceLocation
    ) async throws {
        let service = ConformanceApplication.service
        let characteristic = ConformanceApplication.characteristic
        func expectCalls(_ expected: [String], _ step: String) async throws {
            let diagnostics = { "\(bluetoothd): \(application.notifyCalls)" }
            try await pollUntil(
                "\(step): \(expected)", timeout: .seconds(30), diagnostics: diagnostics, sourceLocation: sourceLocation
            ) { application.notifyCalls.count >= expected.count }
            #expect(
                application.notifyCalls == expected, "\(bluetoothd), \(step): \(application.notifyCalls)",
                sourceLocation: sourceLocation)
        }
        try await peer.connectAsCentral()
        try await peer.subscribe(service: service, characteristic: characteristic)
        try await expectCalls(["StartNotify"], "subscribed")
        try await peer.disconnectAsCentral()
        try await expectCalls(["StartNotify", "StopNotify"], "the link is lost")
        try await peer.connectAsCentral()
        try await peer.subscribe(service: service, characteristic: characteristic)
        try await expectCalls(["StartNotify", "StopNotify", "StartNotify"], "subscribed on a new link")
        try await peer.disconnectAsCentral()
    }
}
