import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// `BlueZObjectCache` keeping characteristic values current from `PropertiesChanged`: the fast
/// path (only `Value` changed) and every other shape, which takes the general path, keep the
/// cache as bluetoothd's tree is; bad shapes are ignored, never trap.
@Suite struct BlueZObjectCacheValueTests {
    static let characteristic = try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24/service000a/char000b")
    static let other = try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24/service000a/char000d")
    static let gattCharacteristic = "org.bluez.GattCharacteristic1"

    /// A bluetoothd whose tree holds two characteristics (`Value` [0], not notifying).
    static func tree() -> DBusValue {
        func gattObject(_ uuid: String) -> DBusValue {
            .dictionary(
                key: "s", value: "a{sv}",
                [
                    .init(
                        .string(gattCharacteristic),
                        .stringVariantDictionary([
                            "UUID": .string(uuid), "Value": .bytes([0]), "Notifying": .bool(false),
                        ]))
                ])
        }
        return .dictionary(
            key: "o", value: "a{sa{sv}}",
            [
                .init(.objectPath(characteristic), gattObject("00002a37-0000-1000-8000-00805f9b34fb")),
                .init(.objectPath(other), gattObject("00002a38-0000-1000-8000-00805f9b34fb")),
            ])
    }

    final class Recorder: Sendable {
        let events = PosixMutex<[String]>([])
        var log: [String] { events.withLock { $0 } }
        func record(_ event: BlueZObjectCache.Event) {
            let name: String
            switch event {
            case .loaded: name = "loaded"
            case .valueChanged(let path, _, let bytes): name = "value \(path.rawValue.suffix(8)) \(bytes)"
            case .propertiesChanged(let path, _, let changed, let invalidated):
                name = "changed \(path.rawValue.suffix(8)) \(changed.keys.sorted()) \(invalidated)"
            default: name = "other"
            }
            events.withLock { $0.append(name) }
        }
    }

    /// The cache on the app's connection, loaded from a stand-in bluetoothd.
    static func start() async throws -> (AgentTestBus, BlueZObjectCache, Recorder) {
        let bus = try await AgentTestBus(withBluetoothd: false)
        let objectManager = DBusInterface(
            "org.freedesktop.DBus.ObjectManager",
            methods: [DBusMethod("GetManagedObjects", in: "") { $0.reply([Self.tree()]) }])
        try await bus.bluetoothd.export([objectManager], at: .root)
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        let recorder = Recorder()
        let cache = BlueZObjectCache(connection: bus.app) { recorder.record($0) }
        try await cache.start()
        try await waitUntil("loaded") { recorder.log == ["loaded"] }
        return (bus, cache, recorder)
    }

    static func properties(_ cache: BlueZObjectCache, _ bus: AgentTestBus, at path: ObjectPath = characteristic)
        -> [String: DBusValue]?
    {
        bus.app.queue.sync { cache.objects[path]?[gattCharacteristic] }
    }

    /// Emits `PropertiesChanged` with any body as bluetoothd.
    static func emit(_ bus: AgentTestBus, at path: ObjectPath = characteristic, _ arguments: [DBusValue]) {
        bus.bluetoothd.emit(
            path: path, interface: .properties, member: DBusMessage.propertiesChangedMember, arguments: arguments)
    }

    @Test func valuesAreAppliedInOrderAndReportedEach() async throws {
        let (bus, cache, recorder) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        let path = try InterfaceName(Self.gattCharacteristic)
        for value in 1...20 {
            bus.bluetoothd.emitPropertiesChanged(
                path: Self.characteristic, interface: path, changed: ["Value": .bytes([UInt8(value), 0x06])])
        }
        bus.bluetoothd.emitPropertiesChanged(path: Self.other, interface: path, changed: ["Value": .bytes([0xEE])])
        try await waitUntil("22 events") { recorder.log.count == 22 }
        #expect(
            Array(recorder.log.dropFirst()) == (1...20).map { "value char000b \([$0, 6])" } + ["value char000d [238]"])
        #expect(Self.properties(cache, bus)?["Value"] == .bytes([20, 0x06]))
        #expect(Self.properties(cache, bus, at: Self.other)?["Value"] == .bytes([0xEE]))
        #expect(Self.properties(cache, bus)?["UUID"] == .string("00002a37-0000-1000-8000-00805f9b34fb"))
    }

    @Test func valueWithOtherPropertiesOrInvalidationsTakesTheGeneralPath() async throws {
        let (bus, cache, recorder) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        let interface = try InterfaceName(Self.gattCharacteristic)
        bus.bluetoothd.emitPropertiesChanged(
            path: Self.characteristic, interface: interface, changed: ["Value": .bytes([7]), "Notifying": .bool(true)])
        try await waitUntil("the first change") { recorder.log.count == 2 }
        #expect(recorder.log.last == "changed char000b [\"Notifying\", \"Value\"] []")
        #expect(Self.properties(cache, bus)?["Value"] == .bytes([7]))
        #expect(Self.properties(cache, bus)?["Notifying"] == .bool(true))

        // A value with something invalidated: both applied.
        bus.bluetoothd.emitPropertiesChanged(
            path: Self.characteristic, interface: interface, changed: ["Value": .bytes([8])],
            invalidated: ["Notifying"])
        try await waitUntil("the second change") { recorder.log.count == 3 }
        #expect(recorder.log.last == "changed char000b [\"Value\"] [\"Notifying\"]")
        #expect(Self.properties(cache, bus)?["Value"] == .bytes([8]))
        #expect(Self.properties(cache, bus)?["Notifying"] == nil)

        // Value invalidated alone.
        bus.bluetoothd.emitPropertiesChanged(
            path: Self.characteristic, interface: interface, changed: [:], invalidated: ["Value"])
        try await waitUntil("the third change") { recorder.log.count == 4 }
        #expect(Self.properties(cache, bus)?["Value"] == nil)
        #expect(Self.properties(cache, bus)?["UUID"] != nil)
    }

    @Test func badShapesAreIgnoredOrKeptAsTheyCame() async throws {
        let (bus, cache, recorder) = try await Self.start()
        defer { withExtendedLifetime(bus) {} }
        // A Value that is no byte array: not the fast path; kept as bluetoothd sent it.
        Self.emit(
            bus,
            [.string(Self.gattCharacteristic), .stringVariantDictionary(["Value": .string("x")]), .stringArray([])])
        // Bodies of another signature: ignored.
        Self.emit(bus, [.string(Self.gattCharacteristic)])
        Self.emit(bus, [.string(Self.gattCharacteristic), .stringVariantDictionary(["Value": .bytes([1])])])
        // A value for an interface the object does not have, and for an object the tree lacks: ignored.
        Self.emit(
            bus,
            [.string("org.bluez.GattDescriptor1"), .stringVariantDictionary(["Value": .bytes([2])]), .stringArray([])])
        let unknown = try ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24/service000a/char00ff")
        Self.emit(
            bus, at: unknown,
            [.string(Self.gattCharacteristic), .stringVariantDictionary(["Value": .bytes([3])]), .stringArray([])])
        // Then a good value, which must be the next event after the first change.
        Self.emit(
            bus, [.string(Self.gattCharacteristic), .stringVariantDictionary(["Value": .bytes([4])]), .stringArray([])])
        try await waitUntil("the good value") { recorder.log.contains("value char000b [4]") }
        #expect(recorder.log == ["loaded", "changed char000b [\"Value\"] []", "value char000b [4]"])
        #expect(Self.properties(cache, bus)?["Value"] == .bytes([4]))
        #expect(bus.app.queue.sync { cache.objects[unknown] } == nil)
    }
}
