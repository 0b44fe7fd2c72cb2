import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// `BlueZObjectCache` keeping characteristic values current from `PropertiesChanged`: the fast
/// path (only `Value` changed) and every other shape, which takes the general path, keep the
/// cache as bluetoothd's tree is; bad shapes are ignored, never trap.
@Suite(.timeLimit(.minutes(5))) struct BlueZObjectCacheValueTests {
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

/// Values land where a lookup would put them whatever the tree did meanwhile: objects added and
/// removed around a notifying characteristic, its own removal and return, an invalidated
/// `Value` that comes back, many notifying objects (the cache once remembered the places of the
/// last eight in the tree, which such changes made stale). Nothing traps.
@Suite(.timeLimit(.minutes(5))) struct BlueZObjectCacheValueTreeTests {
    typealias Base = BlueZObjectCacheValueTests

    static func gattObject(_ uuid: String, value: [UInt8]) -> DBusValue {
        .dictionary(
            key: "s", value: "a{sv}",
            [
                .init(
                    .string(Base.gattCharacteristic),
                    .stringVariantDictionary(["UUID": .string(uuid), "Value": .bytes(value)]))
            ])
    }

    static func added(_ bus: AgentTestBus, _ path: ObjectPath, value: [UInt8]) {
        bus.bluetoothd.emit(
            path: .root, interface: .objectManager, member: "InterfacesAdded",
            arguments: [.objectPath(path), gattObject("00002a39-0000-1000-8000-00805f9b34fb", value: value)])
    }

    static func removed(_ bus: AgentTestBus, _ path: ObjectPath) {
        bus.bluetoothd.emit(
            path: .root, interface: .objectManager, member: "InterfacesRemoved",
            arguments: [.objectPath(path), .stringArray([Base.gattCharacteristic])])
    }

    static func value(_ bus: AgentTestBus, _ path: ObjectPath, _ bytes: [UInt8]) {
        bus.bluetoothd.emitPropertiesChanged(
            path: path, interface: try! InterfaceName(Base.gattCharacteristic), changed: ["Value": .bytes(bytes)])
    }

    @Test func valuesLandWhereALookupWouldPutThemWhateverTheTreeDidMeanwhile() async throws {
        let (bus, cache, recorder) = try await Base.start()
        defer { withExtendedLifetime(bus) {} }
        let characteristic = Base.characteristic
        Self.value(bus, characteristic, [1])
        // Enough new objects to make the tree grow its storage, then each notifying once: more
        // notifying objects than there are slots.
        let many = (0..<40).map { try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_25/service0010/char\(100 + $0)") }
        for path in many { Self.added(bus, path, value: [0]) }
        Self.value(bus, characteristic, [2])
        for (number, path) in many.enumerated() { Self.value(bus, path, [UInt8(number)]) }
        // The characteristic goes and comes back (a service change), then notifies.
        Self.removed(bus, characteristic)
        Self.value(bus, characteristic, [3])  // no such object now: ignored
        Self.added(bus, characteristic, value: [0])
        Self.value(bus, characteristic, [4])
        // Its Value invalidated, then notified again: the property comes back.
        bus.bluetoothd.emitPropertiesChanged(
            path: characteristic, interface: try InterfaceName(Base.gattCharacteristic), changed: [:],
            invalidated: ["Value"])
        Self.value(bus, characteristic, [5])
        // Half of the many go; the others and the characteristic notify again.
        for path in many.prefix(20) { Self.removed(bus, path) }
        for (number, path) in many.enumerated().dropFirst(20) { Self.value(bus, path, [UInt8(number), 1]) }
        Self.value(bus, characteristic, [6])
        try await waitUntil("the last value") { recorder.log.last == "value char000b [6]" }

        let values = recorder.log.filter { $0.hasPrefix("value char000b") }
        let expectedValues: [String] = [1, 2, 4, 5, 6].map { "value char000b [\($0)]" }
        #expect(values == expectedValues)
        #expect(Base.properties(cache, bus)?["Value"] == .bytes([6]))
        #expect(Base.properties(cache, bus)?["UUID"] == .string("00002a39-0000-1000-8000-00805f9b34fb"))
        for (number, path) in many.enumerated() {
            let expected: DBusValue? = number < 20 ? nil : .bytes([UInt8(number), 1])
            let stored: DBusValue? = Base.properties(cache, bus, at: path)?["Value"]
            #expect(stored == expected, "\(path)")
        }
        // Each value that was stored was reported once: the characteristic's 5, the many's 40 + 20.
        let reported = recorder.log.filter { $0.hasPrefix("value ") }.count
        #expect(reported == 65)
    }

    @Test func afterBluetoothdRestartsValuesFindTheReloadedTree() async throws {
        let (bus, cache, recorder) = try await Base.start()
        defer { withExtendedLifetime(bus) {} }
        Self.value(bus, Base.characteristic, [1])
        try await waitUntil("the first value") { recorder.log.last == "value char000b [1]" }
        // bluetoothd leaves and comes back: the cache empties and loads the tree again.
        try await bus.bluetoothd.releaseName("org.bluez")
        try await waitUntil("vanished") { recorder.log.last == "other" }
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        try await waitUntil("loaded again") { recorder.log.last == "loaded" }
        Self.value(bus, Base.characteristic, [2])
        try await waitUntil("the value after the restart") { recorder.log.last == "value char000b [2]" }
        #expect(Base.properties(cache, bus)?["Value"] == .bytes([2]))
    }
}
