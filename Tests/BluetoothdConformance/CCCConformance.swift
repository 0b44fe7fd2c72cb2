import TestSupport
public import Testing

/// What a GATT application sees of a central's subscription across a link loss.
///
/// bluetoothd keeps the Client Characteristic Configuration of a central that is not bonded for
/// the link's life only (`src/gatt-database.c`, `att_disconnected` → `clear_ccc_state`): when
/// the link goes, the application gets `StopNotify` (it was the last subscriber), and when the
/// central subscribes again on a new link, `StartNotify` again. (A bonded central's CCC is kept:
/// one `StartNotify` in all. Not checked here yet.)
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
