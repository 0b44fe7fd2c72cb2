import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// A central that floods a peripheral manager: requests hold nothing once answered, writes
/// without response wait in a bounded backlog, restoration saves are coalesced.
@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerFloodTests {
    /// Keeps nothing it is given (unless told to), and can be stalled.
    final class Forgetful: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.forgetful")
        let reads = PosixMutex(0)
        let writes = PosixMutex(0)
        let subscriptions = PosixMutex(0)
        /// Answers each read with one byte.
        let answers = PosixMutex(false)
        /// bluetoothd's method calls of the reads, held weakly.
        let calls = PosixMutex<[Weak]>([])
        /// Writes without response that still hold bluetoothd's method call.
        let writesHoldingCalls = PosixMutex(0)
        final class Weak: @unchecked Sendable {
            weak var value: AnyObject?
            init(_ value: AnyObject?) { self.value = value }
        }
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            reads.withLock { $0 += 1 }
            calls.withLock { $0.append(Weak(request.bluez?.invocationObject)) }
            if answers.withLock({ $0 }) {
                request.value = Data([7])
                peripheral.respond(to: request, withResult: .success)
            }
        }
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
            writes.withLock { $0 += requests.count }
            let holding = requests.filter { $0.bluez != nil }.count
            writesHoldingCalls.withLock { $0 += holding }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) { subscriptions.withLock { $0 += 1 } }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
        ) { subscriptions.withLock { $0 += 1 } }
    }

    /// A manager publishing 0xABCD with a readable 0xAB01, a write-without-response 0xAB02 and a
    /// notifying 0xAB03, and a connected central.
    static func publish(_ bluez: SimulatedBlueZ, _ options: PeripheralManagerOptions? = nil) async throws -> (
        PeripheralManager, Forgetful, SimulatedCentral
    ) {
        let delegate = Forgetful()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue,
            options: options ?? PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xAB01), properties: [.read], value: nil, permissions: [.readable]),
            MutableCharacteristic(
                type: BluetoothUUID(0xAB02), properties: [.writeWithoutResponse], value: nil, permissions: [.writeable]),
            MutableCharacteristic(type: BluetoothUUID(0xAB03), properties: [.notify], value: nil, permissions: []),
        ]
        manager.add(service)
        try await waitUntil("published") { bluez.adapters.first?.registeredApplications.count == 1 }
        return (manager, delegate, try bluez.addCentral(address: "11:22:33:44:55:66"))
    }

    /// The delegate drops a read without answering it: the central gets `unlikelyError` at
    /// once, not after the 20 s timeout (the timer does not hold the request).
    @Test func aReadReleasedUnansweredFailsAtOnce() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, delegate, central) = try await Self.publish(bluez)
        defer { withExtendedLifetime(manager) {} }
        let started = ContinuousClock.now
        await #expect(throws: SimulatedATTError.unlikelyError) {
            _ = try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01")
        }
        #expect(ContinuousClock.now - started < .seconds(5), "answered on release, not by the 20 s timeout")
        #expect(delegate.reads.withLock { $0 } == 1)
    }

    /// An answered read and a write without response leave nothing behind: bluetoothd's
    /// messages are released as soon as the app lets the requests go.
    @Test func answeredRequestsHoldNothing() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, delegate, central) = try await Self.publish(bluez)
        defer { withExtendedLifetime(manager) {} }
        delegate.answers.withLock { $0 = true }
        for _ in 0..<20 {
            #expect(try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01") == [7])
            try await central.write(serviceUUID: "ABCD", characteristicUUID: "AB02", value: [1], type: .command)
        }
        try await waitUntil("every write delivered") { delegate.writes.withLock { $0 } == 20 }
        manager.queue.sync {}
        #expect(delegate.calls.withLock { $0.count } == 20)
        try await waitUntil("no read's method call kept", timeout: .seconds(5)) {
            delegate.calls.withLock { $0.allSatisfy { $0.value == nil } }
        }
        #expect(delegate.writesHoldingCalls.withLock { $0 } == 0, "nothing to answer, nothing held")
    }

    /// Writes without response while the delegate queue is stuck: at most 1024 wait, the
    /// others are dropped and counted.
    @Test func writesWithoutResponseWaitingForAStuckDelegateAreBounded() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, delegate, central) = try await Self.publish(bluez)
        defer { withExtendedLifetime(manager) {} }
        let gate = DispatchSemaphore(value: 0)
        delegate.queue.async { gate.wait() }
        let limit = manager.writesWithoutResponse.limit
        for index in 0..<(limit + 100) {
            try await central.write(
                serviceUUID: "ABCD", characteristicUUID: "AB02", value: [UInt8(index & 0xFF)], type: .command)
        }
        // The manager answers bluetoothd before it admits a write to the backlog (on the bus
        // queue): wait for the last admissions, or one could land after the gate opens.
        let busQueue = try #require(manager.engine.sync { $0.client?.queue })
        busQueue.sync {}
        #expect(manager.writesWithoutResponse.waitingCount == limit)
        // (The simulated central does not report a write command that did not go out.)
        #expect((1...100).contains(manager.writesWithoutResponse.droppedCount))
        gate.signal()
        try await waitUntil("the backlog delivered") { delegate.writes.withLock { $0 } == limit }
        #expect(manager.writesWithoutResponse.waitingCount == 0)
    }

    /// Long writes without response while the delegate queue is stuck: the backlog holds at
    /// most its byte limit of values (256 KiB), well before 1024 writes wait.
    @Test func longWritesWithoutResponseWaitingForAStuckDelegateAreBoundedInBytes() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, delegate, central) = try await Self.publish(bluez)
        defer { withExtendedLifetime(manager) {} }
        let gate = DispatchSemaphore(value: 0)
        delegate.queue.async { gate.wait() }
        let backlog = manager.writesWithoutResponse
        let length = 510
        let fitting = backlog.byteLimit / length
        #expect(fitting < backlog.limit, "the byte bound is the one that bites for long writes")
        for index in 0..<(fitting + 50) {
            let value = [UInt8](repeating: UInt8(index & 0xFF), count: length)
            try await central.write(serviceUUID: "ABCD", characteristicUUID: "AB02", value: value, type: .command)
        }
        let busQueue = try #require(manager.engine.sync { $0.client?.queue })
        busQueue.sync {}
        #expect(backlog.waitingCount == fitting)
        #expect(backlog.waitingByteCount == fitting * length)
        #expect(backlog.waitingByteCount <= backlog.byteLimit)
        #expect((1...50).contains(backlog.droppedCount))
        gate.signal()
        try await waitUntil("the backlog delivered") { delegate.writes.withLock { $0 } == fitting }
        #expect(backlog.waitingCount == 0)
        #expect(backlog.waitingByteCount == 0)
    }

    /// A central toggling its subscription fast on a manager with a restore identifier: at
    /// most one state file write a second, none on the delegate queue, and the last state is
    /// written when the manager goes.
    @Test func subscriptionTogglesAreSavedAtMostOnceASecond() async throws {
        let rig = try await PeripheralRestorationTests.Rig.start("toggler")
        defer { rig.tearDown() }
        final class WeakManager: @unchecked Sendable { weak var value: PeripheralManager? }
        let released = WeakManager()
        let toggles = 60
        do {
            let (manager, delegate, central) = try await Self.publish(rig.bluez, rig.options)
            released.value = manager
            let writer = try #require(manager.restoration?.writer)
            let started = ContinuousClock.now
            for _ in 0..<(toggles / 2) {
                _ = try await central.subscribe(serviceUUID: "ABCD", characteristicUUID: "AB03")
                try await central.unsubscribe(serviceUUID: "ABCD", characteristicUUID: "AB03")
            }
            _ = try await central.subscribe(serviceUUID: "ABCD", characteristicUUID: "AB03")
            try await waitUntil("every toggle reported") { delegate.subscriptions.withLock { $0 } == toggles + 1 }
            manager.queue.sync {}
            let seconds = (ContinuousClock.now - started) / .seconds(1)
            // The publication's own save, then at most one a second.
            #expect(
                Double(writer.writeCount) <= 2 + seconds.rounded(.up), "\(writer.writeCount) writes in \(seconds) s")
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        // The manager's release writes the last state (at its end, which the weak reference
        // does not wait for).
        try await waitUntil("the last state, written on release") {
            let saved = try rig.store.load(PeripheralRestorationRecord.self, role: .peripheral, for: "toggler")
            let characteristic = saved?.services.first?.characteristics.first { $0.uuid == "AB03" }
            return characteristic?.subscribedCentrals?.count == 1
        }
    }
}
