import BlueZKit
import Foundation
import TestSupport
import Testing

/// In the same serialized suite as the other end-to-end tests: they share hci0 and hci1.
extension EndToEndTests {
    /// A pairing delegate that decides nothing (its presence alone must register no agent).
    final class IdlePairingDelegate: PairingAgentDelegate {
        let ioCapability = IOCapability.displayYesNo
    }

    /// bluetoothd's own log judges: the two example programs and managers with the default
    /// options (one with a pairing delegate) make no BlueZKit agent the default; a manager that
    /// asks is the only one bluetoothd names, and it gives the default back when it goes.
    @Test(.loadScaledTimeLimit(minutes: 3), .asksForDefaultAgent) func noBlueZKitAgentIsTheDefaultUnlessItsAppAsked()
        async throws
    {
        try await ExamplePeripheral.forgetKnownDevices()
        let logStart = EndToEndScope.logSize()
        let peripheral = try ExampleProgram(
            "heart-rate-peripheral", ["--json", "--adapter", "hci1", "--name", "E2E Agent"], busAddress: nil)
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        let central = try ExampleProgram(
            "heart-rate-central", ["--json", "--adapter", "hci0", "--name", "E2E Agent", "--count", "1"],
            busAddress: nil)
        try await central.waitForEvents("heartRate", timeout: .seconds(90))

        let quiet = E2ECentralDelegate()
        let plain = CentralManager(delegate: quiet, queue: quiet.queue, options: CentralManagerOptions(adapter: "hci0"))
        let withDelegate = CentralManager(
            delegate: quiet, queue: quiet.queue, options: CentralManagerOptions(adapter: "hci0"))
        let idle = IdlePairingDelegate()
        withDelegate.pairingAgentDelegate = idle
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("the managers are powered on", timeout: .seconds(30)) {
            plain.state == .poweredOn && withDelegate.state == .poweredOn && manager.state == .poweredOn
        }
        #expect(DefaultAgentCheck.lines(from: logStart).filter(DefaultAgentCheck.namesOurAgent).isEmpty)

        // Started last: had the others registered an agent, bluetoothd would have said so by now.
        var asking: CentralManager? = CentralManager(
            delegate: quiet, queue: quiet.queue,
            options: CentralManagerOptions(adapter: "hci0", requestsDefaultPairingAgent: true))
        try await waitUntil("the asking manager's agent is registered", timeout: .seconds(30)) {
            asking?.pairingAgent.isRegistered == true
        }
        try await pollUntil("bluetoothd names the asking manager's agent", timeout: .seconds(10)) {
            !DefaultAgentCheck.lines(from: logStart).filter(DefaultAgentCheck.namesOurAgent).isEmpty
        }
        let ours = DefaultAgentCheck.lines(from: logStart).filter(DefaultAgentCheck.namesOurAgent)
        #expect(ours.count == 1, "\(ours)")
        #expect(!plain.pairingAgent.isRegistered && !withDelegate.pairingAgent.isRegistered)
        #expect(!manager.pairingAgent.isRegistered)
        withExtendedLifetime(asking) {}
        asking = nil
        try await pollUntil("the asking manager gave the default back", timeout: .seconds(15)) {
            !(DefaultAgentCheck.lines(from: logStart).last.map(DefaultAgentCheck.namesOurAgent) ?? false)
        }
        try await pollUntil("the central exits after --count", timeout: .seconds(30)) { central.status != nil }
        #expect(central.status == 0, "\(central.diagnostics())")
        withExtendedLifetime((plain, withDelegate, manager, idle)) {}
    }
}
