import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// A read that starts a pairing reaches the app with the value even when bluetoothd fails it
/// during that pairing (ATT 0x0E: its retried request written into the ATT socket the kernel
/// holds for the pairing; caught in the emulated environment on 5.87 and in CI on 5.82): BlueZKit
/// reads once more, and bluetoothd sends that read on the encrypted link
/// (`CentralEngine+ReadRetry.swift`). The simulator plays the race with
/// `SimulatedBlueZ.Options.losesTheSecurityRetry`.
@Suite(.timeLimit(.minutes(2))) struct CentralReadDuringPairingTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.read-during-pairing")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    /// A connected `lock` (its agent bluetoothd's default) and its first service's characteristics.
    static func connect(
        _ bluez: SimulatedBlueZ, _ characteristics: [SimulatedCharacteristic]
    ) async throws -> (CentralManager, Peripheral, [Characteristic], Quiet) {
        let source = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:1E", name: "Lock", serviceUUIDs: ["FFF0"],
            services: [SimulatedService(uuid: "FFF0", characteristics: characteristics)])
        try bluez.addPeripheral(source)
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: true))
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("the default agent registered") { bluez.agentRegistrations.contains { $0.isDefault } }
        let lock = try await firstDiscovery(central, scanningFor: nil, advertising: source)
        try await central.connect(to: lock)
        let service = try #require(try await lock.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let found = try await lock.discoverCharacteristics(matching: nil, in: service)
        return (central, lock, found, delegate)
    }

    /// Whether bluetoothd loses the race or not, the read that starts the pairing gets the value,
    /// and the peripheral answers one read: the one sent on the encrypted link.
    @Test(arguments: [true, false])
    func anEncryptedReadGetsTheValueAfterItsPairing(bluetoothdLosesTheRetry: Bool) async throws {
        var options = SimulatedBlueZ.Options()
        options.losesTheSecurityRetry = bluetoothdLosesTheRetry
        let bluez = try await SimulatedBlueZ.start(options: options)
        defer { bluez.stop() }
        let reads = Atomic(0)
        let secret = SimulatedCharacteristic(uuid: "FFF1", flags: ["encrypt-read"]) { _ throws(SimulatedATTError) in
            reads.add(1, ordering: .relaxed)
            return [7]
        }
        let (central, lock, found, _) = try await Self.connect(bluez, [secret])
        _ = central
        #expect(!lock.isPaired)
        #expect(try await lock.readValue(of: try #require(found.first)) == Data([7]))
        #expect(reads.load(ordering: .relaxed) == 1, "the peripheral answered the read sent after the pairing")
        try await waitUntil("paired") { lock.isPaired }
    }

    /// A peripheral that answers Unlikely Error itself is read twice, and the app gets its answer.
    @Test func aPeripheralsOwnUnlikelyErrorIsReadTwiceAndReported() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let reads = Atomic(0)
        let faulty = SimulatedCharacteristic(uuid: "FFF1", flags: ["read"]) { _ throws(SimulatedATTError) in
            reads.add(1, ordering: .relaxed)
            throw .unlikelyError
        }
        let (central, lock, found, _) = try await Self.connect(bluez, [faulty])
        _ = central
        let error = await #expect(throws: ATTError.self) { try await lock.readValue(of: try #require(found.first)) }
        #expect(error?.code == .unlikelyError)
        #expect(reads.load(ordering: .relaxed) == 2)
        #expect(lock.state == .connected)
    }

    /// A write is never sent twice (it could overtake the writes after it): a write that lost the
    /// race fails with the error bluetoothd gave, and the peripheral never saw it.
    @Test func anEncryptedWriteFailedDuringItsPairingIsNotSentAgain() async throws {
        var options = SimulatedBlueZ.Options()
        options.losesTheSecurityRetry = true
        let bluez = try await SimulatedBlueZ.start(options: options)
        defer { bluez.stop() }
        let writes = Atomic(0)
        let control = SimulatedCharacteristic(uuid: "FFF2", flags: ["encrypt-write"], onRead: nil) {
            _ throws(SimulatedATTError) in
            writes.add(1, ordering: .relaxed)
        }
        let (central, lock, found, _) = try await Self.connect(bluez, [control])
        _ = central
        let error = await #expect(throws: ATTError.self) {
            try await lock.writeValue(Data([1]), to: try #require(found.first))
        }
        #expect(error?.code == .unlikelyError)
        try await waitUntil("paired by the pairing the write started") { lock.isPaired }
        #expect(writes.load(ordering: .relaxed) == 0)
    }
}
