import BlueZ
import DBus
import Dispatch
import Locking
import TestSupport
import Testing

/// `BlueZObjectCache` loading bluetoothd's tree, through a private dbus-daemon and a stand-in
/// bluetoothd whose `GetManagedObjects` is scripted: signals sent right after the reply are kept,
/// failures are tried again, AccessDenied is kept for the managers to report.
@Suite(.timeLimit(.minutes(5))) struct BlueZObjectCacheLoadTests {
    static let adapter = try! ObjectPath("/org/bluez/hci0")
    static let device = try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24")

    /// bluetoothd's answers to `GetManagedObjects`, in order (the last one repeats).
    enum Answer: Sendable {
        case tree
        case error(String)
        /// The tree, then at once an `InterfacesAdded` for a device that the tree does not hold;
        /// the app's queue is held meanwhile, so that it reads both in one go (as it does when
        /// bluetoothd sends them back to back).
        case treeThenDevice(app: DBusConnection)
    }

    final class StandIn: Sendable {
        let answers: PosixMutex<[Answer]>
        let calls = PosixMutex(0)
        init(_ answers: [Answer]) { self.answers = PosixMutex(answers) }

        static func adapterTree() -> DBusValue {
            let adapter = DBusValue.stringVariantDictionary([
                "Address": .string("00:AA:01:00:00:23"), "Powered": .bool(true),
            ])
            let interfaces = DBusValue.dictionary(
                key: "s", value: "a{sv}", [.init(.string("org.bluez.Adapter1"), adapter)])
            return .dictionary(
                key: "o", value: "a{sa{sv}}", [.init(.objectPath(BlueZObjectCacheLoadTests.adapter), interfaces)])
        }

        func interface(on connection: DBusConnection) -> DBusInterface {
            DBusInterface(
                "org.freedesktop.DBus.ObjectManager",
                methods: [
                    DBusMethod("GetManagedObjects", in: "") { [self] invocation in
                        let answer = answers.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
                        calls.withLock { $0 += 1 }
                        switch answer {
                        case .tree:
                            invocation.reply([Self.adapterTree()])
                        case .error(let name):
                            invocation.reply(error: DBusError(name: name, message: "as told"))
                        case .treeThenDevice(let app):
                            let gate = DispatchSemaphore(value: 0)
                            app.queue.async { gate.wait() }
                            defer { DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { gate.signal() } }
                            invocation.reply([Self.adapterTree()])
                            let device = DBusValue.dictionary(
                                key: "s", value: "a{sv}",
                                [
                                    .init(
                                        .string("org.bluez.Device1"),
                                        .stringVariantDictionary([
                                            "Address": .string("00:AA:01:01:00:24"),
                                            "Adapter": .objectPath(BlueZObjectCacheLoadTests.adapter),
                                        ]))
                                ])
                            connection.emit(
                                path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                                member: "InterfacesAdded",
                                arguments: [.objectPath(BlueZObjectCacheLoadTests.device), device])
                        }
                    }
                ])
        }
    }

    final class Recorder: Sendable {
        let events = PosixMutex<[String]>([])
        var log: [String] { events.withLock { $0 } }
        func record(_ event: BlueZObjectCache.Event) {
            let name: String
            switch event {
            case .loaded: name = "loaded"
            case .vanished: name = "vanished"
            case .loadFailed(let error): name = "failed \(error.name)"
            case .interfacesAdded(let path, _): name = "added \(path.rawValue)"
            case .interfacesRemoved(let path, _): name = "removed \(path.rawValue)"
            case .propertiesChanged(let path, _, _, _): name = "changed \(path.rawValue)"
            case .valueChanged(let path, _, _): name = "value \(path.rawValue)"
            }
            events.withLock { $0.append(name) }
        }
    }

    /// The stand-in on the bus, then a cache started on the app's connection.
    static func start(_ answers: @Sendable (DBusConnection) -> [Answer]) async throws -> (
        AgentTestBus, StandIn, BlueZObjectCache, Recorder
    ) {
        let bus = try await AgentTestBus(withBluetoothd: false)
        let standIn = StandIn(answers(bus.app))
        try await bus.bluetoothd.export([standIn.interface(on: bus.bluetoothd)], at: .root)
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        let recorder = Recorder()
        let cache = BlueZObjectCache(connection: bus.app) { recorder.record($0) }
        try await cache.start()
        return (bus, standIn, cache, recorder)
    }

    @Test func aSignalSentRightAfterTheTreeIsKept() async throws {
        let (bus, _, cache, recorder) = try await Self.start { [.treeThenDevice(app: $0)] }
        defer { withExtendedLifetime(bus) {} }
        try await waitUntil("the device added after the tree") {
            recorder.log.contains("added \(Self.device.rawValue)")
        }
        #expect(recorder.log == ["loaded", "added \(Self.device.rawValue)"])
        let devices = bus.app.queue.sync { cache.paths(with: BlueZNames.device) }
        #expect(devices == [Self.device])
    }

    @Test func aFailedLoadIsTriedAgain() async throws {
        let (bus, standIn, cache, recorder) = try await Self.start { _ in
            [.error("org.bluez.Error.Failed"), .error("org.freedesktop.DBus.Error.NoReply"), .tree]
        }
        defer { withExtendedLifetime(bus) {} }
        try await waitUntil("loaded after two failures") { recorder.log.contains("loaded") }
        #expect(
            recorder.log == [
                "failed org.bluez.Error.Failed", "failed org.freedesktop.DBus.Error.NoReply", "loaded",
            ])
        #expect(standIn.calls.withLock { $0 } == 3)
        #expect(bus.app.queue.sync { cache.isLoaded && cache.loadError == nil })
    }

    @Test func accessDeniedIsKeptUntilALoadSucceeds() async throws {
        let (bus, _, cache, recorder) = try await Self.start { _ in
            [.error("org.freedesktop.DBus.Error.AccessDenied"), .tree]
        }
        defer { withExtendedLifetime(bus) {} }
        try await waitUntil("refused") { !recorder.log.isEmpty }
        #expect(recorder.log.first == "failed org.freedesktop.DBus.Error.AccessDenied")
        try await waitUntil("loaded when allowed") { recorder.log.contains("loaded") }
        #expect(bus.app.queue.sync { cache.loadError == nil })
    }
}
