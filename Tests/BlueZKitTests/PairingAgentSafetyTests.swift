import BlueZKitTesting
import DBus
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// The manager's agent is safe by default: not registered at all unless the app asked for the
/// default agent (bluetoothd makes any registered agent the default sooner or later), just works
/// only without a delegate, a refusal for whatever a person should have answered.
@Suite(.timeLimit(.minutes(5))) struct PairingAgentSafetyTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.pairing-safety")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    final class QuietPeripheral: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.pairing-safety.peripheral")
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
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

    /// A central manager on `bluez` that asked for the default agent, once bluetoothd holds it.
    static func central(on bluez: SimulatedBlueZ) async throws -> CentralManager {
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: true))
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("agent registered") { central.pairingAgent.isRegistered }
        return central
    }

    /// An agent another program registered, on a connection of its own (its unique name).
    static func outsideAgent(on bluez: SimulatedBlueZ) async throws -> DBusConnection {
        let connection = try await DBusConnection.open(address: bluez.busAddress, label: "outside-agent")
        let release = DBusMethod("Release", in: "") { $0.reply() }
        let path = try ObjectPath("/outside/agent")
        try await connection.export([DBusInterface("org.bluez.Agent1", methods: [release])], at: path)
        _ = try await connection.call(
            destination: "org.bluez", path: try ObjectPath("/org/bluez"), interface: "org.bluez.AgentManager1",
            member: "RegisterAgent", arguments: [.objectPath(path), .string("KeyboardDisplay")])
        return connection
    }

    /// Neither a manager with the default options nor one with only a pairing delegate registers
    /// anything: bluetoothd would make the first one its default agent, for every program.
    @Test func onlyAManagerThatAsksForTheDefaultRegistersAnAgent() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let quiet = Quiet()
        let plain = CentralManager(
            delegate: quiet, queue: quiet.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        let withDelegate = CentralManager(
            delegate: quiet, queue: quiet.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        let decider = Confirming()
        withDelegate.pairingAgentDelegate = decider
        let quietPeripheral = QuietPeripheral()
        let peripheral = PeripheralManager(
            delegate: quietPeripheral, queue: quietPeripheral.queue,
            options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("all powered on") {
            plain.state == .poweredOn && withDelegate.state == .poweredOn && peripheral.state == .poweredOn
        }
        // A manager that asks, started last, registers: by then the others would have too.
        var asking: CentralManager? = try await Self.central(on: bluez)
        #expect(bluez.agentRegistrations == [.init(capability: "NoInputNoOutput", isDefault: true)])
        #expect(bluez.defaultAgentLog.count == 1)
        #expect(bluez.defaultAgentLog.first?.hasPrefix("Default agent set to ") == true)
        #expect(!plain.pairingAgent.isRegistered && !withDelegate.pairingAgent.isRegistered)
        #expect(!peripheral.pairingAgent.isRegistered)
        withExtendedLifetime(asking) {}
        asking = nil
        try await waitUntil("no agent is left") { bluez.agentRegistrations.isEmpty }
        #expect(bluez.defaultAgentLog.last == "Default agent cleared")
        withExtendedLifetime((plain, withDelegate, peripheral, decider)) {}
    }

    /// A manager that asks takes the default from another program's agent, and gives it back.
    @Test func askingTakesTheDefaultAndGivesItBack() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let outside = try await Self.outsideAgent(on: bluez)
        defer { outside.close() }
        let outsideName = try #require(outside.uniqueName?.rawValue)
        #expect(bluez.defaultAgentLog == ["Default agent set to \(outsideName) /outside/agent"])
        var central: CentralManager? = try await Self.central(on: bluez)
        try await waitUntil("the manager's agent is the default") {
            bluez.defaultAgentLog.count == 2 && bluez.agentRegistrations.filter(\.isDefault).count == 1
        }
        #expect(bluez.defaultAgentLog.last?.contains("/org/bluezkit/agent") == true)
        #expect(bluez.agentRegistrations.first { $0.isDefault }?.capability == "NoInputNoOutput")
        withExtendedLifetime(central) {}
        central = nil
        try await waitUntil("the other program's agent is the default again") {
            bluez.defaultAgentLog.last == "Default agent set to \(outsideName) /outside/agent"
        }
        #expect(bluez.agentRegistrations == [.init(capability: "KeyboardDisplay", isDefault: true)])
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
                && bluez.agentRegistrations == [.init(capability: "NoInputNoOutput", isDefault: true)]
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
        #expect(bluez.agentRegistrations == [.init(capability: "KeyboardDisplay", isDefault: true)])
        withExtendedLifetime((central, deciders)) {}
    }
}
