import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// `SimulatedCentral.stallNotifySockets()`: the simulated bluetoothd 5.82 stops reading a
/// central's notify socket, which fills up, and reads it again on `resumeNotifySockets()`.
@Suite(.timeLimit(.minutes(1))) struct SimulatedNotifyStallTests {
    final class Recorder: PeripheralManagerDelegate, Sendable {
        let queue = DispatchQueue(label: "test.stall")
        let subscribed = PosixMutex<[Central]>([])
        let ready = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            subscribed.withLock { $0.append(central) }
        }
        func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
            ready.withLock { $0 += 1 }
        }
    }

    @Test func aStalledCentralsSocketFillsUpAndDrainsOnResume() async throws {
        let bluez = try await SimulatedBlueZ.start(options: .init(version: .bluez5_82))
        defer { bluez.stop() }
        let delegate = Recorder()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.notify], value: nil, permissions: [.readable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [characteristic]
        try await manager.addService(service)
        let stalled = try bluez.addCentral(address: "11:22:33:44:55:01")
        let other = try bluez.addCentral(address: "11:22:33:44:55:02")
        var counts: [PosixMutex<Int>] = []
        var drains: [Task<Void, Never>] = []
        for (index, central) in [stalled, other].enumerated() {
            let values = try await central.subscribe(
                serviceUUID: "0000abcd-0000-1000-8000-00805f9b34fb", characteristicUUID: "ab01")
            try await waitUntil("subscribed") { delegate.subscribed.withLock { $0.count } == index + 1 }
            let count = PosixMutex(0)
            counts.append(count)
            drains.append(Task { for await _ in values { count.withLock { $0 += 1 } } })
        }
        defer { for drain in drains { drain.cancel() } }
        // In the order they subscribed: the stalled one first.
        let centrals = delegate.subscribed.withLock { $0 }

        stalled.stallNotifySockets()
        // Values for the stalled central wait in its socket; one for the other central, sent
        // after them, arrives (bluetoothd reads the sockets in the order they became readable).
        #expect(manager.updateValue(Data([1]), for: characteristic, onSubscribedCentrals: [centrals[0]]))
        #expect(manager.updateValue(Data([2]), for: characteristic, onSubscribedCentrals: [centrals[1]]))
        try await waitUntil("the other central got its value") { counts[1].withLock { $0 } == 1 }
        #expect(counts[0].withLock { $0 } == 0)
        // It fills up: updateValue is refused.
        var sent = 1
        while sent < 100_000,
            manager.updateValue(Data([UInt8(sent & 0xFF)]), for: characteristic, onSubscribedCentrals: [centrals[0]])
        {
            sent += 1
        }
        #expect(sent < 100_000)
        #expect(counts[0].withLock { $0 } == 0)

        stalled.resumeNotifySockets()
        try await waitUntil("the manager is ready again") { delegate.ready.withLock { $0 } == 1 }
        try await waitUntil("what piled up reached the central") { counts[0].withLock { $0 } == sent }
        #expect(manager.updateValue(Data([0xFF]), for: characteristic, onSubscribedCentrals: nil))
    }
}
