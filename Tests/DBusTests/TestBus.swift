import Foundation
import Locking
import Testing

@testable import DBus

/// A private bus for one test, with helpers to open connections to it.
///
/// Every connection opened through `connect` is closed when the bus goes away,
/// so exported objects (whose handlers may capture their connection) do not
/// keep sockets and queues alive after the test.
final class TestBus: Sendable {
    let daemon: PrivateBusDaemon
    private let connections = PosixMutex<[DBusConnection]>([])

    init() throws {
        daemon = try PrivateBusDaemon()
    }

    func connect(_ label: String = "test") async throws -> DBusConnection {
        let connection = try await DBusConnection.open(address: daemon.address, label: label)
        connections.withLock { $0.append(connection) }
        return connection
    }

    deinit {
        for connection in connections.withLock({ $0 }) { connection.close() }
        daemon.stop()
    }
}

/// A thread-safe box for values collected by handlers.
///
/// Handlers append on a connection's thread while the test polls: contended, so a `PosixMutex`,
/// whose hand-over ThreadSanitizer sees (it misses `Synchronization.Mutex`'s contended one).
final class Collected<T: Sendable>: Sendable {
    private let storage = PosixMutex<[T]>([])
    func append(_ value: T) { storage.withLock { $0.append(value) } }
    var values: [T] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
    var last: T? { storage.withLock { $0.last } }
}

/// A thread-safe value shared between a test and its handlers.
final class Locked<T: Sendable>: Sendable {
    private let storage: PosixMutex<T>
    init(_ value: T) { storage = PosixMutex(value) }
    var value: T {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

/// A validated object path from a literal in a test.
func path(_ text: String) throws -> ObjectPath { try ObjectPath(text) }

// MARK: - Fixtures

let testInterface: InterfaceName = "com.example.Test"

extension DBusConnection {
    /// Exports `/echo` (interface `com.example.Test`, method `Echo`, any
    /// arguments) that answers with the arguments it got. Uses a subtree so
    /// that no signature check stands between the caller and the decoder.
    func exportEcho(at prefix: String = "/echo") async throws {
        try await exportSubtree(at: path(prefix)) { invocation in
            do throws(DBusError) {
                invocation.reply(try invocation.arguments())
            } catch {
                invocation.reply(error: error)
            }
        }
    }

    /// Calls `Echo` on `target`'s echo subtree and returns what came back.
    func echo(_ values: [DBusValue], via target: DBusConnection, at prefix: String = "/echo") async throws
        -> [DBusValue]
    {
        try await call(
            destination: target.uniqueName, path: path(prefix), interface: testInterface, member: "Echo",
            arguments: values)
    }

    /// `GetConnectionStats` for `name` from the bus's Debug.Stats interface.
    func busStats(of name: BusName) async throws -> [String: DBusValue] {
        let reply = try await call(
            destination: .bus, path: path("/org/freedesktop/DBus"), interface: "org.freedesktop.DBus.Debug.Stats",
            member: "GetConnectionStats", arguments: [.string(name.rawValue)])
        return try #require(reply.first?.stringKeyedDictionary)
    }

    /// How many match rules the bus holds for this connection.
    func busMatchRuleCount() async throws -> UInt32 {
        let stats = try await busStats(of: try #require(uniqueName))
        return try #require(stats["MatchRules"]?.uint32Value)
    }
}

/// Values nested `depth` containers deep around `leaf`, by kind.
enum Nesting {
    static func variants(_ depth: Int, around leaf: DBusValue = .int32(7)) -> DBusValue {
        var value = leaf
        for _ in 0..<depth { value = .variant(value) }
        return value
    }

    static func structs(_ depth: Int, around leaf: DBusValue = .int32(7)) -> DBusValue {
        var value = leaf
        for _ in 0..<depth { value = .structure([value]) }
        return value
    }

    static func arrays(_ depth: Int, around leaf: DBusValue = .int32(7)) -> DBusValue {
        var value = leaf
        for _ in 0..<depth { value = .array(element: value.signature, [value]) }
        return value
    }
}

/// A method-call message to a made-up object, for tests that need no bus.
func localCall(_ arguments: [DBusValue]) throws -> DBusMessage {
    try DBusMessage.methodCall(
        destination: "com.example.Nobody", path: path("/local"), interface: testInterface, member: "M",
        arguments: arguments)
}
