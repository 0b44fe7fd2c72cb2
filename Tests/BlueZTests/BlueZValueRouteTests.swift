import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// `BlueZClient.routeValues(of:to:)`: a subscribed characteristic's `Value` changes go to its
/// route (stored in the cache as before, no `valueChanged` event), everything else takes the
/// general path, and the route follows the object's removal, return and bluetoothd's restart.
@Suite(.timeLimit(.minutes(5))) struct BlueZValueRouteTests {
    typealias Base = BlueZObjectCacheValueTests
    typealias Tree = BlueZObjectCacheValueTreeTests

    /// The client's value events and the route's values, in one log.
    final class Log: Sendable {
        private let entries = PosixMutex<[String]>([])
        var all: [String] { entries.withLock { $0 } }
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    }

    static func start() async throws -> (AgentTestBus, BlueZClient, Log) {
        let bus = try await AgentTestBus(withBluetoothd: false)
        let objectManager = DBusInterface(
            "org.freedesktop.DBus.ObjectManager",
            methods: [DBusMethod("GetManagedObjects", in: "") { $0.reply([Base.tree()]) }])
        try await bus.bluetoothd.export([objectManager], at: .root)
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        let log = Log()
        let client = BlueZClient(connection: bus.app, adapter: nil) { event in
            switch event {
            case .valueChanged(let attribute, let bytes): log.append("event \(attribute.token.suffix(8)) \(bytes)")
            case .adapterChanged(let status): log.append("adapter \(status)")
            default: break
            }
        }
        try await client.start()
        try await waitUntil("loaded") { bus.app.queue.sync { client.cache.isLoaded } }
        return (bus, client, log)
    }

    static func route(_ client: BlueZClient, _ log: Log) throws -> BlueZClient.ValueRoute {
        let attribute = try #require(BlueZClient.AttributeID(token: Base.characteristic.rawValue))
        return try #require(
            client.queue.sync { client.routeValues(of: attribute) { log.append("route \($0)") } })
    }

    /// A value of the other characteristic, which takes the general path: once it is logged,
    /// everything bluetoothd sent before it was handled.
    static func sentinel(_ bus: AgentTestBus, _ log: Log, _ value: UInt8) async throws {
        Tree.value(bus, Base.other, [value])
        try await waitUntil("the sentinel \(value)") { log.all.last == "event char000d [\(value)]" }
    }

    @Test func aRoutedValueGoesToItsRouteAndIsStored() async throws {
        let (bus, client, log) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        let route = try Self.route(client, log)
        Tree.value(bus, Base.characteristic, [1])
        Tree.value(bus, Base.characteristic, [2])
        // Another shape (Value with another property): the general path, no route, no value event.
        bus.bluetoothd.emitPropertiesChanged(
            path: Base.characteristic, interface: try InterfaceName(Base.gattCharacteristic),
            changed: ["Value": .bytes([3]), "Notifying": .bool(true)])
        try await Self.sentinel(bus, log, 9)
        #expect(log.all.filter { !$0.hasPrefix("adapter") } == ["route [1]", "route [2]", "event char000d [9]"])
        #expect(Base.properties(client.cache, bus)?["Value"] == .bytes([3]))
        #expect(Base.properties(client.cache, bus)?["Notifying"] == .bool(true))

        // Cancelled: the general path reports the values again.
        client.queue.sync { route.cancel() }
        Tree.value(bus, Base.characteristic, [4])
        try await Self.sentinel(bus, log, 10)
        #expect(log.all.suffix(2) == ["event char000b [4]", "event char000d [10]"])
        try await waitUntil("the claim removed") { bus.app.claimCount == 0 }
    }

    @Test func aRouteFollowsItsObjectOutAndBack() async throws {
        let (bus, client, log) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        let route = try Self.route(client, log)
        defer { route.cancel() }
        // The object goes (a service change): its values are dropped, as the general path drops them.
        Tree.removed(bus, Base.characteristic)
        Tree.value(bus, Base.characteristic, [1])
        try await Self.sentinel(bus, log, 9)
        // It comes back at the same path: the route takes its values again, and the cache has them.
        Tree.added(bus, Base.characteristic, value: [0])
        Tree.value(bus, Base.characteristic, [2])
        try await Self.sentinel(bus, log, 10)
        let values = log.all.filter { !$0.hasPrefix("adapter") }
        #expect(values == ["event char000d [9]", "route [2]", "event char000d [10]"])
        #expect(Base.properties(client.cache, bus)?["Value"] == .bytes([2]))
    }

    @Test func aRouteOutlivesABluetoothdRestartAndTakesNothingWhileNoTreeIsLoaded() async throws {
        let (bus, client, log) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        let route = try Self.route(client, log)
        defer { route.cancel() }
        try await bus.bluetoothd.releaseName("org.bluez")
        try await waitUntil("bluetoothd gone") { !bus.app.queue.sync { client.cache.isLoaded } }
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        try await waitUntil("loaded again") { bus.app.queue.sync { client.cache.isLoaded } }
        Tree.value(bus, Base.characteristic, [5])
        try await Self.sentinel(bus, log, 9)
        #expect(log.all.filter { !$0.hasPrefix("adapter") } == ["route [5]", "event char000d [9]"])
        #expect(Base.properties(client.cache, bus)?["Value"] == .bytes([5]))
    }

    /// A route's value waits in its slot until the cache is read: every reader sees the newest
    /// value, and a route released anywhere (not cancelled on the queue) frees its slot, its
    /// last value kept.
    @Test func aRoutesSlotKeepsTheNewestValueForReadersAndIsFreedWithTheRoute() async throws {
        let (bus, client, log) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        var route: BlueZClient.ValueRoute? = try Self.route(client, log)
        #expect(bus.app.queue.sync { client.cache.valueSlotCount } == 1)
        for value: UInt8 in 1...5 { Tree.value(bus, Base.characteristic, [value]) }
        try await Self.sentinel(bus, log, 9)
        #expect(log.all.filter { $0.hasPrefix("route") }.count == 5)
        #expect(Base.properties(client.cache, bus)?["Value"] == .bytes([5]))

        Tree.value(bus, Base.characteristic, [6])
        try await waitUntil("the sixth value routed") { log.all.last == "route [6]" }
        withExtendedLifetime(route) {}
        route = nil
        try await waitUntil("the slot freed") { bus.app.queue.sync { client.cache.valueSlotCount } == 0 }
        #expect(Base.properties(client.cache, bus)?["Value"] == .bytes([6]))
        // No route: the general path again.
        Tree.value(bus, Base.characteristic, [7])
        try await Self.sentinel(bus, log, 10)
        #expect(log.all.suffix(2) == ["event char000b [7]", "event char000d [10]"])
    }
}
