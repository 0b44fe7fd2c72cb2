import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// The app's pairing-agent delegate: the manager's agent registers with its capability and
/// bluetoothd's requests reach it, as the simulated kernel's pairing matrix makes them.
@Suite(.timeLimit(.minutes(5))) struct PairingAgentDelegateTests {
    /// Records what it is asked and answers as told.
    final class Decider: PairingAgentDelegate, CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.pairing-agent")
        let ioCapability: IOCapability
        let confirms: Bool
        let passkey: UInt32?
        let authorizes: Bool
        private let events = PosixMutex<[String]>([])
        private let peers = PosixMutex<[PairingPeer]>([])
        var log: [String] { events.withLock { $0 } }
        var askedAbout: [PairingPeer] { peers.withLock { $0 } }

        init(_ ioCapability: IOCapability, confirms: Bool = true, passkey: UInt32? = nil, authorizes: Bool = true) {
            self.ioCapability = ioCapability
            self.confirms = confirms
            self.passkey = passkey
            self.authorizes = authorizes
        }

        private func record(_ event: String, _ peer: PairingPeer) {
            dispatchPrecondition(condition: .onQueue(queue))
            events.withLock { $0.append(event) }
            peers.withLock { $0.append(peer) }
        }

        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func pairingAgent(
            _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
            completion: @escaping @Sendable (Bool) -> Void
        ) {
            record("confirm \(passkey)", peer)
            completion(confirms)
        }
        func pairingAgent(
            _ agent: PairingAgent, requestPasskeyFor peer: PairingPeer,
            completion: @escaping @Sendable (UInt32?) -> Void
        ) {
            record("passkey", peer)
            completion(passkey)
        }
        func pairingAgent(
            _ agent: PairingAgent, authorizePairingWith peer: PairingPeer,
            completion: @escaping @Sendable (Bool) -> Void
        ) {
            record("authorize", peer)
            completion(authorizes)
        }
        func pairingAgent(_ agent: PairingAgent, displayPasskey passkey: UInt32, entered: Int, for peer: PairingPeer) {
            record("display \(passkey)", peer)
        }
    }

    struct Outcome {
        var result: Result<Data, any Error>
        var lock: Peripheral
        var central: CentralManager
    }

    /// Connects to a lock with the given IO capability and reads its encrypted characteristic.
    static func readSecret(
        _ decider: Decider, lock capability: SimulatedPeripheral.IOCapability, passkey: UInt32 = 123_456,
        address: String, body: (Outcome) async throws -> Void
    ) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: address, name: "Lock", serviceUUIDs: ["FFF0"],
            services: [
                SimulatedService(
                    uuid: "FFF0",
                    characteristics: [SimulatedCharacteristic(uuid: "FFF1", flags: ["encrypt-read"], value: [7])])
            ], ioCapability: capability, passkey: passkey)
        try bluez.addPeripheral(sensor)
        let central = CentralManager(
            delegate: decider, queue: decider.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: true))
        central.pairingAgentDelegate = decider
        #expect(central.pairingAgent.ioCapability == decider.ioCapability)
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("agent registered") { central.pairingAgent.isRegistered }
        let lock = try await firstDiscovery(central, scanningFor: nil, advertising: sensor)
        try await central.connect(to: lock)
        let service = try #require(try await lock.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let secret = try #require(try await lock.discoverCharacteristics(matching: nil, in: service).first)
        let result: Result<Data, any Error>
        do {
            result = .success(try await lock.readValue(of: secret))
        } catch {
            result = .failure(error)
        }
        try await body(Outcome(result: result, lock: lock, central: central))
    }

    @Test func numericComparisonAskedAndAcceptedPairs() async throws {
        let decider = Decider(.displayYesNo, confirms: true)
        try await Self.readSecret(decider, lock: .displayYesNo, passkey: 654_321, address: "C0:FF:EE:00:01:01") {
            outcome in
            #expect((try? outcome.result.get()) == Data([7]))
            #expect(decider.log == ["confirm 654321"])
            #expect(decider.askedAbout.first?.peripheral === outcome.lock)
            #expect(decider.askedAbout.first?.identifier == outcome.lock.identifier)
            #expect(decider.askedAbout.first?.address == "C0:FF:EE:00:01:01")
            try await waitUntil("paired") { outcome.lock.isPaired }
        }
    }

    @Test func numericComparisonRefusedFailsWithPairingFailed() async throws {
        let decider = Decider(.keyboardDisplay, confirms: false)
        try await Self.readSecret(decider, lock: .displayYesNo, address: "C0:FF:EE:00:01:02") { outcome in
            #expect(decider.log == ["confirm 123456"])
            #expect(throws: BluetoothError.self) { try outcome.result.get() }
            guard case .failure(let error) = outcome.result else { return }
            #expect((error as? BluetoothError)?.code == .pairingFailed)
            #expect((error as? BluetoothError)?.underlying is ATTError)
            #expect(!outcome.lock.isPaired)
        }
    }

    @Test func passkeyEntryAnsweredByTheDelegatePairs() async throws {
        let decider = Decider(.keyboardOnly, passkey: 20_240)
        try await Self.readSecret(decider, lock: .displayOnly, passkey: 20_240, address: "C0:FF:EE:00:01:03") {
            outcome in
            #expect((try? outcome.result.get()) == Data([7]))
            #expect(decider.log == ["passkey"])
        }
    }

    @Test func aWrongPasskeyFailsWithPairingFailed() async throws {
        let decider = Decider(.keyboardOnly, passkey: 1)
        try await Self.readSecret(decider, lock: .displayOnly, passkey: 20_240, address: "C0:FF:EE:00:01:04") {
            outcome in
            #expect(decider.log == ["passkey"])
            let error = #expect(throws: BluetoothError.self) { try outcome.result.get() }
            #expect(error?.code == .pairingFailed)
        }
    }

    @Test func theDelegateSeesThePasskeyItDisplays() async throws {
        let decider = Decider(.displayOnly)
        try await Self.readSecret(decider, lock: .keyboardOnly, passkey: 777_777, address: "C0:FF:EE:00:01:05") {
            outcome in
            #expect((try? outcome.result.get()) == Data([7]))
            try await waitUntil("displayed") { decider.log == ["display 777777"] }
        }
    }

    @Test func justWorksAsksForAuthorization() async throws {
        let decider = Decider(.displayYesNo, authorizes: true)
        try await Self.readSecret(decider, lock: .noInputNoOutput, address: "C0:FF:EE:00:01:06") { outcome in
            #expect((try? outcome.result.get()) == Data([7]))
            #expect(decider.log == ["authorize"])
        }
    }

    @Test func justWorksRefusedFailsWithPairingFailed() async throws {
        let decider = Decider(.displayYesNo, authorizes: false)
        try await Self.readSecret(decider, lock: .noInputNoOutput, address: "C0:FF:EE:00:01:07") { outcome in
            #expect(decider.log == ["authorize"])
            let error = #expect(throws: BluetoothError.self) { try outcome.result.get() }
            #expect(error?.code == .pairingFailed)
        }
    }

    @Test func clearingTheDelegateRegistersNoInputNoOutputAgain() async throws {
        let decider = Decider(.keyboardOnly, passkey: 1)
        try await Self.readSecret(decider, lock: .noInputNoOutput, address: "C0:FF:EE:00:01:08") { outcome in
            #expect(outcome.central.pairingAgent.ioCapability == .keyboardOnly)
            outcome.central.pairingAgentDelegate = nil
            #expect(outcome.central.pairingAgentDelegate == nil)
            #expect(outcome.central.pairingAgent.ioCapability == .noInputNoOutput)
            try await waitUntil("registered again") { outcome.central.pairingAgent.isRegistered }
        }
    }
}
