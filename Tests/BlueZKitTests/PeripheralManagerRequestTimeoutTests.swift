import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// A request the app never answers is answered for it before bluetoothd's own timeout.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerRequestTimeoutTests {
    /// Takes read requests and never answers them.
    final class Silent: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.silent")
        let reads = PosixMutex<[ATTRequest]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            reads.withLock { $0.append(request) }
        }
    }

    @Test func anUnansweredReadFailsWithAnATTErrorInsteadOfHanging() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let delegate = Silent()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        manager.engine.sync { $0.requestTimeout = .milliseconds(300) }
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.read], value: nil, permissions: [.readable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [characteristic]
        manager.add(service)
        try await waitUntil("published") { bluez.adapters.first?.registeredApplications.count == 1 }
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        let started = ContinuousClock.now
        await #expect(throws: SimulatedATTError.unlikelyError) {
            _ = try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01")
        }
        #expect(ContinuousClock.now - started < .seconds(10), "answered by our timeout, not bluetoothd's")
        #expect(delegate.reads.withLock { $0.count } == 1)
        // A late answer is ignored (the request was answered once already).
        let late = try #require(delegate.reads.withLock { $0.first })
        late.value = Data([1])
        manager.respond(to: late, withResult: .success)
    }
}
