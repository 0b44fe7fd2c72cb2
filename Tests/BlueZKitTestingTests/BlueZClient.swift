import DBus
import Locking

/// A raw D-Bus client of the simulated bluetoothd: calls and a record of every signal it receives.
final class BlueZClient: Sendable {
    let connection: DBusConnection
    let signals = SignalRecorder()
    private let subscription: PosixMutex<DBusSubscription?> = PosixMutex(nil)

    init(address: String) async throws {
        connection = try await DBusConnection.open(address: address, label: "test.client")
        let recorder = signals
        let subscription = try await connection.subscribe(DBusMatchRule()) { recorder.append($0) }
        self.subscription.withLock { $0 = subscription }
    }

    /// Calls `member` on `org.bluez`; throws the error reply.
    @discardableResult
    func call(
        _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(10)
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.bluez", path: ObjectPath(path), interface: InterfaceName(interface),
            member: MemberName(member), arguments: arguments, timeout: timeout)
    }

    /// Calls `member` and returns the reply message: its `serial` orders it among the signals
    /// bluetoothd sent (one connection numbers its messages in the order it sends them).
    func reply(_ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = []) async throws
        -> DBusMessage
    {
        let message = try DBusMessage.methodCall(
            destination: "org.bluez", path: ObjectPath(path), interface: InterfaceName(interface),
            member: MemberName(member), arguments: arguments)
        return try await connection.call(message, timeout: .seconds(10))
    }

    /// Calls `member` and returns its error reply, or nil when it succeeded.
    func error(
        _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(10)
    ) async -> DBusError? {
        do {
            try await call(path, interface, member, arguments, timeout: timeout)
            return nil
        } catch let error as DBusError {
            return error
        } catch {
            return DBusError(.failed, "\(error)")
        }
    }

    /// `Properties.Get`, unwrapped.
    func property(_ path: String, _ interface: String, _ name: String) async throws -> DBusValue? {
        try await call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?
            .unwrappingVariants
    }

    /// `Properties.GetAll`, unwrapped.
    func properties(_ path: String, _ interface: String) async throws -> [String: DBusValue] {
        let reply = try await call(path, "org.freedesktop.DBus.Properties", "GetAll", [.string(interface)])
        return (reply.first?.stringKeyedDictionary ?? [:]).mapValues(\.unwrappingVariants)
    }

    /// `GetManagedObjects` as path → interface → properties.
    func managedObjects() async throws -> [String: [String: [String: DBusValue]]] {
        let reply = try await call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        var objects: [String: [String: [String: DBusValue]]] = [:]
        for entry in reply.first?.dictionaryEntries ?? [] {
            guard let path = entry.key.objectPathValue else { continue }
            objects[path.rawValue] = Signal.interfaces(entry.value)
        }
        return objects
    }

    /// `Properties.Set`.
    func set(_ path: String, _ interface: String, _ name: String, _ value: DBusValue) async throws {
        try await call(
            path, "org.freedesktop.DBus.Properties", "Set", [.string(interface), .string(name), .variant(value)])
    }

    func close() { connection.close() }
}
