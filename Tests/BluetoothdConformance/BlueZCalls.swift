package import DBus
import Locking
import TestSupport
public import Testing

/// A plain D-Bus client of the bluetoothd under test: method calls, properties, and a record of
/// every signal it received, with bounded waits (times ``TestTime/scale``).
///
/// Each instance is its own bus connection: bluetoothd keys discovery sessions and agents by
/// connection, so a body that needs two clients opens two.
public final class BlueZCalls: Sendable {
    /// The connection (package: bodies build arguments with the DBus module's values).
    package let connection: DBusConnection
    private let received = PosixMutex<[BusSignal]>([])
    private let subscription = PosixMutex<DBusSubscription?>(nil)

    private init(connection: DBusConnection) {
        self.connection = connection
    }

    /// Opens a connection to the bus of `bluetoothd` and starts recording every signal on it.
    public static func open(_ bluetoothd: BluetoothdUnderTest, label: String = "conformance") async throws
        -> BlueZCalls
    {
        let connection = try await DBusConnection.open(address: bluetoothd.busAddress, label: label)
        let calls = BlueZCalls(connection: connection)
        let subscription = try await connection.subscribe(DBusMatchRule()) { [received = calls.received] message in
            guard message.kind == .signal else { return }
            received.withLock { $0.append(BusSignal(message)) }
        }
        calls.subscription.withLock { $0 = subscription }
        return calls
    }

    /// Closes the connection (bluetoothd then drops its discovery session and agent).
    public func close() {
        subscription.withLock { $0 = nil }
        connection.close()
    }

    /// Our unique name on the bus (`:1.42`).
    public var uniqueName: String { connection.uniqueName?.rawValue ?? "" }

    // MARK: Calls

    /// Calls `member` on `org.bluez`; throws the error reply as a `DBusError`.
    @discardableResult
    package func call(
        _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.bluez", path: ObjectPath(path), interface: InterfaceName(interface),
            member: MemberName(member), arguments: arguments, timeout: timeout)
    }

    /// Calls `member` and returns its error reply, or nil when it succeeded.
    package func error(
        _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(25)
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

    /// `Properties.Get`, unwrapped; nil when the object or property is not there.
    package func property(_ path: String, _ interface: String, _ name: String) async -> DBusValue? {
        try? await call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?
            .unwrappingVariants
    }

    /// `GetManagedObjects` as path → interface names.
    public func managedObjects() async throws -> [String: [String]] {
        let reply = try await call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        var objects: [String: [String]] = [:]
        for entry in reply.first?.dictionaryEntries ?? [] {
            guard let path = entry.key.objectPathValue else { continue }
            objects[path.rawValue] = (entry.value.dictionaryEntries ?? []).compactMap { $0.key.stringValue }
        }
        return objects
    }

    // MARK: Signals

    /// The number of signals received so far: a mark to look at later ones only.
    public var mark: Int { received.withLock { $0.count } }

    /// The signals received since `mark`.
    public func signals(since mark: Int) -> [BusSignal] { received.withLock { Array($0.dropFirst(mark)) } }

    /// Waits up to `timeout` for a signal at or after `mark` that matches; records an issue at the
    /// caller and throws when none came.
    @discardableResult
    public func waitForSignal(
        from mark: Int, _ what: String, timeout: Duration = .seconds(20),
        sourceLocation: SourceLocation = #_sourceLocation, where predicate: (BusSignal) -> Bool
    ) async throws -> BusSignal {
        var found: BusSignal?
        let diagnostics = { "signals: \(self.signals(since: mark))" }
        try await pollUntil(what, timeout: timeout, diagnostics: diagnostics, sourceLocation: sourceLocation) {
            found = signals(since: mark).first(where: predicate)
            return found != nil
        }
        return found!
    }

    /// Waits up to `timeout` until the property reads `value`.
    package func waitForProperty(
        _ path: String, _ interface: String, _ name: String, toBe value: DBusValue, timeout: Duration = .seconds(20),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        var last: DBusValue?
        let diagnostics = { "last read: \(String(describing: last))" }
        try await pollUntil(
            "\(name) of \(path) is \(value)", timeout: timeout, diagnostics: diagnostics, sourceLocation: sourceLocation
        ) {
            last = await property(path, interface, name)
            return last == value
        }
    }

    /// Whether `condition` holds within `window` (scaled); false, without an issue, when not:
    /// the wait a body needs to conclude that something did NOT happen.
    public static func holds(within window: Duration, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + TestTime.scaled(window)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }

    // MARK: Adapter and devices

    /// The `Device1` objects of the adapter under test now.
    public func devicePaths(on bluetoothd: BluetoothdUnderTest) async throws -> Set<String> {
        Set(
            try await managedObjects().filter {
                $0.key.hasPrefix(bluetoothd.adapterPath + "/") && $0.value.contains("org.bluez.Device1")
            }.keys)
    }

    /// Whether the object at `path` is exported now.
    public func exists(_ path: String) async throws -> Bool { try await managedObjects()[path] != nil }

    /// `Adapter1.RemoveDevice` of the device at `path` if bluetoothd knows it, and waits until it is
    /// gone, so the next discovery meets it for the first time (its GATT cache goes with it).
    public func forgetDevice(_ path: String, on bluetoothd: BluetoothdUnderTest) async throws {
        guard try await exists(path) else { return }
        try await call(bluetoothd.adapterPath, "org.bluez.Adapter1", "RemoveDevice", [.objectPath(ObjectPath(path))])
        try await pollUntil("\(path) forgotten", timeout: .seconds(20)) { try await !exists(path) }
    }

    /// `SetDiscoveryFilter(filter)` then `StartDiscovery`; waits until the adapter discovers.
    package func startDiscovery(_ filter: [String: DBusValue], on bluetoothd: BluetoothdUnderTest) async throws {
        try await call(
            bluetoothd.adapterPath, "org.bluez.Adapter1", "SetDiscoveryFilter", [.stringVariantDictionary(filter)])
        try await call(bluetoothd.adapterPath, "org.bluez.Adapter1", "StartDiscovery")
        try await waitForProperty(bluetoothd.adapterPath, "org.bluez.Adapter1", "Discovering", toBe: .bool(true))
    }

    /// `StopDiscovery` (an error reply, such as no discovery of ours, is ignored) and an empty filter.
    public func stopDiscovery(on bluetoothd: BluetoothdUnderTest) async {
        _ = await error(bluetoothd.adapterPath, "org.bluez.Adapter1", "StopDiscovery")
        _ = await error(
            bluetoothd.adapterPath, "org.bluez.Adapter1", "SetDiscoveryFilter", [.stringVariantDictionary([:])])
    }

    /// Forgets `peer`, discovers it serving GATT (``ConformancePeer/startGATTServer()``) and calls
    /// `Device1.Connect`: the device's path and the signal mark from just before the call.
    public func connectAfresh(to peer: some ConformancePeer, on bluetoothd: BluetoothdUnderTest) async throws
        -> (path: String, mark: Int)
    {
        let path = bluetoothd.devicePath(try await peer.address)
        try await forgetDevice(path, on: bluetoothd)
        try await discover(path, on: bluetoothd) { try await peer.startGATTServer() }
        let mark = self.mark
        try await call(path, "org.bluez.Device1", "Connect", timeout: TestTime.scaled(.seconds(60)))
        return (path, mark)
    }

    /// Discovers the device at `path` with a filtered discovery (`Transport: le` and an empty
    /// `Pattern`, which reports advertisers without a discoverable flag on every release), then
    /// stops discovering.
    public func discover(_ path: String, on bluetoothd: BluetoothdUnderTest, peerStarts: () async throws -> Void)
        async throws
    {
        try await startDiscovery(["Transport": .string("le"), "Pattern": .string("")], on: bluetoothd)
        try await peerStarts()
        try await pollUntil("\(path) discovered", timeout: .seconds(60)) { try await exists(path) }
        await stopDiscovery(on: bluetoothd)
    }
}
