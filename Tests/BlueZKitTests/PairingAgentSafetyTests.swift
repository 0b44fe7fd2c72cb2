import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// The manager's agent is safe by default: never bluetoothd's default agent unless asked, just
/// works only without a delegate, a refusal for whatever a person should have answered.
@Suite(.timeLimit(.minutes(5))) struct PairingAgentSafetyTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.pairing-safety")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    /// A pairing delegate that implements nothing but its capability.
    final class Silent: PairingAgentDelegate {
        let ioCapability: IOCapability
        init(_ ioCapability: IOCapability) { self.ioCapability = ioCapability }
    }

    /// Confirms every numeric comparison, and counts them.
    final class Confirming: PairingAgentDelegate, @unchecked Sendable {
        let ioCapability = IOCapability.displayYesNo
        let confirmed = PosixMutex(0)
        func pairingAgent(
            _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
            completion: @escaping @Sendable (Bool) -> Void
        ) {
            confirmed.withLock { $0 += 1 }
            completion(true)
        }
    }

    static let device = "C0:FF:EE:00:02:01"
    static let service = "0000110b-0000-1000-8000-00805f9b34fb"

    /// A central manager on `bluez` whose agent bluetoothd holds.
    static func central(on bluez: SimulatedBlueZ, requestsDefault: Bool = false) async throws -> CentralManager {
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: requestsDefault))
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("agent registered") { central.pairingAgent.isRegistered }
        return central
    }

    @Test func aManagerIsNotTheDefaultAgentUnlessItAsks() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let central = try await Self.central(on: bluez)
        #expect(bluez.agentRegistrations == [.init(capability: "NoInputNoOutput", isDefault: false)])
        let asking = try await Self.central(on: bluez, requestsDefault: true)
        try await waitUntil("the second agent is the default") {
            bluez.agentRegistrations.filter(\.isDefault).count == 1
        }
        #expect(bluez.agentRegistrations.count == 2)
        withExtendedLifetime((central, asking)) {}
    }

    @Test func withoutADelegateOnlyJustWorksIsAccepted() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let central = try await Self.central(on: bluez)
        #expect(await bluez.ask(.authorization, aboutDevice: Self.device) == [true])
        #expect(await bluez.ask(.confirmation(123_456), aboutDevice: Self.device) == [false])
        #expect(await bluez.ask(.service(Self.service), aboutDevice: Self.device) == [false])
        #expect(await bluez.ask(.passkey, aboutDevice: Self.device) == [false])
        withExtendedLifetime(central) {}
    }

    @Test func aDelegateThatDoesNotAnswerRefuses() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let central = try await Self.central(on: bluez)
        let silent = Silent(.displayYesNo)
        central.pairingAgentDelegate = silent
        try await waitUntil("registered as DisplayYesNo") {
            central.pairingAgent.isRegistered && bluez.agentRegistrations.first?.capability == "DisplayYesNo"
        }
        #expect(await bluez.ask(.authorization, aboutDevice: Self.device) == [false])
        #expect(await bluez.ask(.service(Self.service), aboutDevice: Self.device) == [false])
        #expect(await bluez.ask(.confirmation(123_456), aboutDevice: Self.device) == [false])
        withExtendedLifetime((central, silent)) {}
    }

    /// Held weakly: once the delegate is gone, the capability it registered must not let the
    /// built-in answers confirm a numeric comparison with nobody looking.
    @Test func aReleasedDelegateRefusesAndTheAgentRegistersNoInputNoOutputAgain() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let central = try await Self.central(on: bluez)
        var decider: Confirming? = Confirming()
        central.pairingAgentDelegate = decider
        try await waitUntil("registered as DisplayYesNo") {
            central.pairingAgent.isRegistered && bluez.agentRegistrations.first?.capability == "DisplayYesNo"
        }
        #expect(await bluez.ask(.confirmation(654_321), aboutDevice: Self.device) == [true])
        #expect(decider?.confirmed.withLock { $0 } == 1)
        decider = nil
        #expect(central.pairingAgentDelegate == nil)
        #expect(await bluez.ask(.confirmation(654_321), aboutDevice: Self.device) == [false])
        try await waitUntil("registered as NoInputNoOutput again") {
            central.pairingAgent.ioCapability == .noInputNoOutput && central.pairingAgent.isRegistered
                && bluez.agentRegistrations == [.init(capability: "NoInputNoOutput", isDefault: false)]
        }
        #expect(await bluez.ask(.authorization, aboutDevice: Self.device) == [true])
    }

    @Test func delegateChangesAreRegisteredInTheOrderTheyWereMade() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let central = try await Self.central(on: bluez)
        let deciders = [Silent(.keyboardOnly), Silent(.displayOnly), Silent(.displayYesNo), Silent(.keyboardDisplay)]
        for _ in 0..<25 {
            for decider in deciders {
                central.pairingAgentDelegate = decider
                // Handed over before the setter returns (not by a task of its own, which may run
                // after the next change's), so the last change is the one registered.
                #expect(central.pairingAgent.handedCapability == decider.ioCapability.bluezName)
            }
        }
        #expect(central.pairingAgent.ioCapability == .keyboardDisplay)
        try await waitUntil("the last delegate's capability is registered") { central.pairingAgent.isRegistered }
        #expect(bluez.agentRegistrations == [.init(capability: "KeyboardDisplay", isDefault: false)])
        withExtendedLifetime((central, deciders)) {}
    }
}
