import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// Loads of bluetoothd's tree that keep overflowing (a storm of signals while `GetManagedObjects`
/// is outstanding) or failing are started again after a back-off, 100 ms doubling up to 5 s, not
/// at once: before, each overflow asked for the whole tree again straight away, as fast as the
/// storm came. The cache's timer is stood in for, so the waits are checked without waiting.
@Suite(.timeLimit(.minutes(1))) struct BlueZObjectCacheRestartTests {
    /// bluetoothd whose `GetManagedObjects` calls are held until the test answers them.
    final class HoldingStandIn: Sendable {
        let held = PosixMutex<[DBusMethodInvocation]>([])
        var calls: Int { held.withLock { $0.count } }

        var interface: DBusInterface {
            DBusInterface(
                "org.freedesktop.DBus.ObjectManager",
                methods: [
                    DBusMethod("GetManagedObjects", in: "") { [self] invocation in
                        held.withLock { $0.append(invocation) }
                    }
                ])
        }
    }

    /// The restarts the cache asked for: each wait, and the action that starts the load.
    final class Timers: Sendable {
        let pending = PosixMutex<[(Duration, @Sendable () -> Void)]>([])
        var delays: [Duration] { pending.withLock { $0.map(\.0) } }
        var timer: BlueZObjectCache.RestartTimer {
            { delay, action in self.pending.withLock { $0.append((delay, action)) } }
        }
        func fireLast() { pending.withLock { $0.last?.1 }?() }
    }

    /// More property changes than a load may hold.
    static func storm(from bluetoothd: DBusConnection) {
        for index in 0...BlueZObjectCache.maximumHeldSignals {
            bluetoothd.emitPropertiesChanged(
                path: BlueZObjectCacheLoadTests.adapter, interface: BlueZNames.adapter,
                changed: ["Name": .string("storm \(index)")])
        }
    }

    /// A started cache on a private bus whose bluetoothd holds every load, its restarts stood in for.
    static func startedCache() async throws -> (
        AgentTestBus, HoldingStandIn, BlueZObjectCacheLoadTests.Recorder, BlueZObjectCache, Timers
    ) {
        let bus = try await AgentTestBus(withBluetoothd: false)
        let standIn = HoldingStandIn()
        try await bus.bluetoothd.export([standIn.interface], at: .root)
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        let recorder = BlueZObjectCacheLoadTests.Recorder()
        let cache = BlueZObjectCache(connection: bus.app) { recorder.record($0) }
        let timers = Timers()
        cache.restartTimer = timers.timer
        try await cache.start()
        return (bus, standIn, recorder, cache, timers)
    }

    @Test func overflowingLoadsStartAgainAfterAGrowingWait() async throws {
        let (bus, standIn, recorder, cache, timers) = try await Self.startedCache()
        defer { cache.stop() }
        try await waitUntil("the first load is asked for") { standIn.calls == 1 }

        Self.storm(from: bus.bluetoothd)
        try await waitUntil("the overflow waits 100 ms before loading again") { timers.delays == [.milliseconds(100)] }
        #expect(standIn.calls == 1, "not asked again at once")
        timers.fireLast()
        try await waitUntil("loading again after the wait") { standIn.calls == 2 }

        Self.storm(from: bus.bluetoothd)
        try await waitUntil("the next overflow waits twice as long") {
            timers.delays == [.milliseconds(100), .milliseconds(200)]
        }
        #expect(standIn.calls == 2)
        timers.fireLast()
        try await waitUntil("loading again after the wait") { standIn.calls == 3 }

        // The third load is answered: loaded, and the back-off starts over.
        standIn.held.withLock { $0.last }?.reply([BlueZObjectCacheLoadTests.StandIn.adapterTree()])
        try await waitUntil("loaded") { recorder.log.contains("loaded") }
        #expect(bus.app.queue.sync { cache.isLoaded && cache.restartsInARow == 0 })
        withExtendedLifetime(bus) {}
    }

    @Test func failingLoadsStartAgainOnTheSameBackOff() async throws {
        let (bus, standIn, recorder, cache, timers) = try await Self.startedCache()
        defer { cache.stop() }
        var expected: [Duration] = []
        for (attempt, wait) in [100, 200, 400].enumerated() {
            try await waitUntil("load \(attempt + 1) is asked for") { standIn.calls == attempt + 1 }
            standIn.held.withLock { $0.last }?.reply(error: DBusError(name: "org.bluez.Error.Failed", message: "no"))
            expected.append(.milliseconds(wait))
            try await waitUntil("the failure waits \(wait) ms") { timers.delays == expected }
            #expect(standIn.calls == attempt + 1)
            timers.fireLast()
        }
        try await waitUntil("loading again") { standIn.calls == 4 }
        #expect(recorder.log.filter { $0.hasPrefix("failed") }.count == 3)
        withExtendedLifetime(bus) {}
    }

    @Test func theWaitDoublesFrom100MillisecondsUpTo5Seconds() {
        let delays = (1...9).map { BlueZObjectCache.restartDelay(afterRestarts: $0) }
        #expect(delays == [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000].map { Duration.milliseconds($0) })
    }
}
