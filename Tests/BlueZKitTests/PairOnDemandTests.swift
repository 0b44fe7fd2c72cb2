import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// `Peripheral.pair()`, `isTrusted`/`setTrusted(_:)` against the simulated bluetoothd: `Pair` goes
/// out on the manager's connection, so the manager's agent answers it, as bluetoothd's
/// `agent_get(sender)` picks the caller's agent.
@Suite(.timeLimit(.minutes(5))) struct PairOnDemandTests {
    /// A connected peripheral of a fresh simulator and manager.
    struct Setup {
        let bluez: SimulatedBlueZ
        let central: CentralManager
        let source: SimulatedPeripheral
        let peripheral: Peripheral
        let delegate: CentralPairingTests.Quiet

        static func make(
            address: String, ioCapability: SimulatedPeripheral.IOCapability = .noInputNoOutput,
            passkey: UInt32 = 123_456,
            registersPairingAgent: Bool = true, requestsDefault: Bool = true,
            pairingDelegate: (any PairingAgentDelegate)? = nil
        ) async throws -> Setup {
            let bluez = try await SimulatedBlueZ.start()
            let source = SimulatedPeripheral(
                address: address, name: "Lock", serviceUUIDs: ["FFF0"], ioCapability: ioCapability, passkey: passkey)
            try bluez.addPeripheral(source)
            let delegate = CentralPairingTests.Quiet()
            let central = CentralManager(
                delegate: delegate, queue: delegate.queue,
                options: CentralManagerOptions(
                    busAddress: bluez.busAddress, registersPairingAgent: registersPairingAgent,
                    requestsDefaultPairingAgent: requestsDefault))
            central.pairingAgentDelegate = pairingDelegate
            try await waitUntil("powered on") { central.state == .poweredOn }
            if requestsDefault {
                try await waitUntil("the agent registered as bluetoothd holds it") { central.pairingAgent.isRegistered }
            }
            let peripheral = try await firstDiscovery(central, scanningFor: nil, advertising: source)
            central.stopScan()
            try await central.connect(to: peripheral)
            return Setup(bluez: bluez, central: central, source: source, peripheral: peripheral, delegate: delegate)
        }
    }

    @Test func justWorksPairsThroughTheManagersAgentAndPairingAgainSucceeds() async throws {
        let setup = try await Setup.make(address: "C0:FF:EE:00:01:01")
        defer { setup.bluez.stop() }
        #expect(!setup.peripheral.isPaired)
        try await setup.peripheral.pair()
        #expect(setup.peripheral.isPaired && setup.peripheral.isBonded)
        // Bonded already: bluetoothd answers AlreadyExists, which is success.
        try await setup.peripheral.pair()
        #expect(setup.peripheral.isPaired)
    }

    @Test(arguments: [true, false]) func numericComparisonAsksTheDelegate(accepts: Bool) async throws {
        let recorder = RecordingPairingDelegate(.displayYesNo, accepts: accepts)
        let setup = try await Setup.make(
            address: "C0:FF:EE:00:01:02", ioCapability: .displayYesNo, passkey: 424_242, pairingDelegate: recorder)
        defer { setup.bluez.stop() }
        do throws(BluetoothError) {
            try await setup.peripheral.pair()
            #expect(accepts, "a refused comparison paired")
        } catch {
            #expect(!accepts, "\(error)")
            #expect(error.code == .pairingFailed, "\(error)")
            #expect(error.underlying != nil)
        }
        #expect(recorder.requests == ["confirm 424242"])
        #expect(setup.peripheral.isPaired == accepts)
        withExtendedLifetime(recorder) {}
    }

    @Test(arguments: [true, false]) func passkeyEntryTypesWhatThePeripheralShows(typedRight: Bool) async throws {
        let recorder = RecordingPairingDelegate(.keyboardOnly, passkey: typedRight ? 654_321 : 111_111)
        let setup = try await Setup.make(
            address: "C0:FF:EE:00:01:03", ioCapability: .displayOnly, passkey: 654_321, pairingDelegate: recorder)
        defer { setup.bluez.stop() }
        let outcome: BluetoothError?
        do throws(BluetoothError) {
            try await setup.peripheral.pair()
            outcome = nil
        } catch { outcome = error }
        #expect(recorder.requests == ["passkey?"])
        #expect(outcome?.code == (typedRight ? nil : .pairingFailed), "\(String(describing: outcome))")
        #expect(setup.peripheral.isPaired == typedRight)
        withExtendedLifetime(recorder) {}
    }

    /// Without any agent (none registered, no default), bluetoothd 5.66's `new_auth` finds no
    /// agent and fails the pairing.
    @Test func withoutAnyAgentPairingFails() async throws {
        let setup = try await Setup.make(
            address: "C0:FF:EE:00:01:04", registersPairingAgent: false, requestsDefault: false)
        defer { setup.bluez.stop() }
        let error = await #expect(throws: BluetoothError.self) { try await setup.peripheral.pair() }
        #expect(error?.code == .pairingFailed)
        #expect(!setup.peripheral.isPaired)
    }

    /// Cancelling the task while the delegate holds the comparison ends `pair()` at once with
    /// `operationCancelled`, and `CancelPairing` ended bluetoothd's bonding: a second `pair()` is
    /// not `inProgress`, and pairs when the comparison is accepted. While the first waits, a second
    /// concurrent `pair()` is refused with `inProgress`.
    @Test func cancellingTheTaskCancelsThePairingAndAConcurrentPairIsInProgress() async throws {
        let recorder = RecordingPairingDelegate(.displayYesNo, accepts: true, holdsFirstComparison: true)
        let setup = try await Setup.make(
            address: "C0:FF:EE:00:01:05", ioCapability: .displayYesNo, passkey: 111_222, pairingDelegate: recorder)
        defer { setup.bluez.stop() }
        let peripheral = setup.peripheral
        let first = Task { () -> BluetoothError? in
            do throws(BluetoothError) {
                try await peripheral.pair()
                return nil
            } catch { return error }
        }
        try await waitUntil("the comparison is asked") { recorder.requests.count == 1 }
        let concurrent = await #expect(throws: BluetoothError.self) { try await peripheral.pair() }
        #expect(concurrent?.code == .inProgress, "\(String(describing: concurrent))")
        first.cancel()
        let cancelled = await first.value
        #expect(cancelled?.code == .operationCancelled, "\(String(describing: cancelled))")
        #expect(!peripheral.isPaired)
        // bluetoothd's bonding ended (CancelPairing): this one is not refused as in progress.
        try await waitUntil("the held comparison was answered") { recorder.heldAnswered }
        try await peripheral.pair()
        #expect(peripheral.isPaired)
        #expect(recorder.requests.count == 2)
        withExtendedLifetime(recorder) {}
    }

    /// A task cancelled before it calls `pair()` sends nothing. The proof: a fault injected for
    /// the next `Pair` is still there for the `pair()` after it.
    @Test func aCancelledTaskSendsNoPair() async throws {
        let setup = try await Setup.make(address: "C0:FF:EE:00:01:06")
        defer { setup.bluez.stop() }
        setup.bluez.inject(.error(name: "org.bluez.Error.Failed", message: "the first Pair"), for: .pair)
        let peripheral = setup.peripheral
        let task = Task { () -> BluetoothError? in
            while !Task.isCancelled { await Task.yield() }
            do throws(BluetoothError) {
                try await peripheral.pair()
                return nil
            } catch { return error }
        }
        task.cancel()
        let error = await task.value
        #expect(error?.code == .operationCancelled, "\(String(describing: error))")
        let next = await #expect(throws: BluetoothError.self) { try await peripheral.pair() }
        #expect(next?.message.contains("the first Pair") == true, "\(String(describing: next))")
        #expect(!peripheral.isPaired)
    }

    @Test func trustIsSetClearedAndReadBack() async throws {
        let setup = try await Setup.make(address: "C0:FF:EE:00:01:07")
        defer { setup.bluez.stop() }
        #expect(!setup.peripheral.isTrusted)
        try await setup.peripheral.setTrusted(true)
        #expect(setup.peripheral.isTrusted)
        try await setup.peripheral.setTrusted(false)
        #expect(!setup.peripheral.isTrusted)
    }

    /// Once bluetoothd forgot the device, `pair()` and `setTrusted` fail with `unknownDevice`.
    @Test func aForgottenPeripheralIsUnknown() async throws {
        let setup = try await Setup.make(address: "C0:FF:EE:00:01:08")
        defer { setup.bluez.stop() }
        try await setup.central.unpair(setup.peripheral)
        try await waitUntil("forgotten") { setup.central.retrieveKnownPeripherals().isEmpty }
        let pairing = await #expect(throws: BluetoothError.self) { try await setup.peripheral.pair() }
        #expect(pairing?.code == .unknownDevice, "\(String(describing: pairing))")
        let trusting = await #expect(throws: BluetoothError.self) { try await setup.peripheral.setTrusted(true) }
        #expect(trusting?.code == .unknownDevice, "\(String(describing: trusting))")
        #expect(!setup.peripheral.isTrusted)
    }
}

/// A pairing delegate that records what it was asked: answers comparisons as told (the first one
/// held, with `holdsFirstComparison`, until bluetoothd cancels it; then it is answered `false`) and
/// passkey requests with its passkey.
final class RecordingPairingDelegate: PairingAgentDelegate, Sendable {
    let ioCapability: BlueZKit.IOCapability
    let accepts: Bool
    let passkey: UInt32?
    let holdsFirstComparison: Bool
    private struct State {
        var requests: [String] = []
        var held: (@Sendable (Bool) -> Void)?
        var heldAnswered = false
    }
    private let state = PosixMutex(State())
    var requests: [String] { state.withLock { $0.requests } }
    var heldAnswered: Bool { state.withLock { $0.heldAnswered } }

    init(
        _ ioCapability: BlueZKit.IOCapability, accepts: Bool = false, passkey: UInt32? = nil,
        holdsFirstComparison: Bool = false
    ) {
        self.ioCapability = ioCapability
        self.accepts = accepts
        self.passkey = passkey
        self.holdsFirstComparison = holdsFirstComparison
    }

    func pairingAgent(
        _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
        completion: @escaping @Sendable (Bool) -> Void
    ) {
        let hold = state.withLock { state in
            state.requests.append("confirm \(passkey)")
            guard holdsFirstComparison, state.requests.count == 1 else { return false }
            state.held = completion
            return true
        }
        if !hold { completion(accepts) }
    }

    func pairingAgent(
        _ agent: PairingAgent, requestPasskeyFor peer: PairingPeer, completion: @escaping @Sendable (UInt32?) -> Void
    ) {
        state.withLock { $0.requests.append("passkey?") }
        completion(passkey)
    }

    func pairingAgentDidCancelRequest(_ agent: PairingAgent) {
        let held = state.withLock { state in
            state.heldAnswered = state.held != nil
            return state.held.take()
        }
        held?(false)
    }
}
