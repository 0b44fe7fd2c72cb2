import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

/// Async calls made in a task that is cancelled already end at once with `CancellationError`,
/// and leave no request behind (a cancel that lands before the call registered its wait is not
/// lost).
@Suite(.timeLimit(.minutes(1))) struct CentralAsyncCancellationTests {
    /// Runs `body` in a task that cancelled itself before the call, and returns its outcome once
    /// the task ended; fails (after the usual wait) when it never ends.
    static func inCancelledTask<Value: Sendable>(
        _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> Result<Value, any Error> {
        let outcome = PosixMutex<Result<Value, any Error>?>(nil)
        Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let result: Result<Value, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
        }
        try await waitUntil("the call ended") { outcome.withLock { $0 } != nil }
        return try #require(outcome.withLock { $0 })
    }

    @Test func connectInACancelledTaskThrowsAndLeavesNoPendingConnection() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        defer { withExtendedLifetime(central) {} }
        // Out of range: a request that went out would stay pending for ever.
        sensor.setInRange(false)
        let outcome = try await Self.inCancelledTask { try await central.connect(to: peripheral) }
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(peripheral.state == .disconnected)
        // A later connect works as usual (no request of the cancelled call is in its way).
        sensor.setInRange(true)
        try await central.connect(to: peripheral)
        #expect(peripheral.state == .connected)
    }

    @Test func readsAndDiscoveriesInACancelledTaskThrow() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        defer { withExtendedLifetime(central) {} }
        try await central.connect(to: peripheral)
        let service = try #require(
            try await peripheral.discoverServices(matching: [BluetoothUUID(0x180D)]).first)
        let location = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x2A38)], in: service).first)

        let discovery = try await Self.inCancelledTask { try await peripheral.discoverServices(matching: nil) }
        #expect(throws: CancellationError.self) { try discovery.get() }
        let read = try await Self.inCancelledTask { try await peripheral.readValue(of: location) }
        #expect(throws: CancellationError.self) { try read.get() }
        // Outside a cancelled task the same calls still get their results.
        #expect(try await peripheral.readValue(of: location) == Data([0x02]))
    }
}
