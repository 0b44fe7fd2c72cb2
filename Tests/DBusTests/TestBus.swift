import Foundation
import Testing

@testable import DBus

/// A private bus for one test, with helpers to open connections to it.
final class TestBus: Sendable {
    let daemon: PrivateBusDaemon

    init() throws {
        daemon = try PrivateBusDaemon()
    }

    func connect(_ label: String = "test") async throws -> DBusConnection {
        try await DBusConnection.open(address: daemon.address, label: label)
    }

    deinit { daemon.stop() }
}

/// Waits until `condition` holds, polling (no fixed sleep stands in for the condition); fails after `timeout`.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("timed out waiting until \(what)")
    throw CancellationError()
}

/// A thread-safe box for values collected by handlers.
final class Collected<T: Sendable>: Sendable {
    private let storage = Mutex<[T]>([])
    func append(_ value: T) { storage.withLock { $0.append(value) } }
    var values: [T] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
}

import Synchronization
