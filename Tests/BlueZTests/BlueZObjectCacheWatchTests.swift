import BlueZ
import DBus
import TestSupport
import Testing

/// `BlueZObjectCache` following only some interfaces' `PropertiesChanged` (the peripheral role's
/// `BlueZClient.Watch.adaptersAndDevices`): the bus delivers nothing else, so a remote
/// characteristic's notifications do not wake it; a cache following everything gets them all.
@Suite(.timeLimit(.minutes(5))) struct BlueZObjectCacheWatchTests {
    typealias Load = BlueZObjectCacheLoadTests
    static let characteristic = try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24/service0010/char0011")

    /// A cache on the stand-in's tree, following `interfaces` (nil: all), and the stand-in's
    /// `PropertiesChanged` for a new characteristic's `Value`, then for the adapter's `Powered`.
    static func changes(following interfaces: [InterfaceName]?) async throws -> [String] {
        let bus = try await AgentTestBus(withBluetoothd: false)
        defer { withExtendedLifetime(bus) {} }
        let standIn = Load.StandIn([.tree])
        try await bus.bluetoothd.export([standIn.interface(on: bus.bluetoothd)], at: .root)
        #expect(try await bus.bluetoothd.requestName("org.bluez") == .primaryOwner)
        let recorder = Load.Recorder()
        let cache = BlueZObjectCache(connection: bus.app, propertyInterfaces: interfaces) { recorder.record($0) }
        try await cache.start()
        defer { cache.stop() }
        try await waitUntil("loaded") { recorder.log.contains("loaded") }
        // The characteristic joins the tree (InterfacesAdded is followed either way).
        bus.bluetoothd.emit(
            path: .root, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            arguments: [
                .objectPath(characteristic),
                .dictionary(
                    key: "s", value: "a{sv}",
                    [
                        .init(
                            .string("org.bluez.GattCharacteristic1"),
                            .stringVariantDictionary(["UUID": .string("00002a37-0000-1000-8000-00805f9b34fb")]))
                    ]),
            ])
        bus.bluetoothd.emit(
            path: characteristic, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [
                .string("org.bluez.GattCharacteristic1"), .stringVariantDictionary(["Value": .bytes([0x16, 72])]),
                .array(element: "s", []),
            ])
        bus.bluetoothd.emit(
            path: Load.adapter, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [
                .string("org.bluez.Adapter1"), .stringVariantDictionary(["Powered": .bool(false)]),
                .array(element: "s", []),
            ])
        // One connection sends them in order: once the last is in, the others were seen or dropped.
        try await waitUntil("the adapter's change") { recorder.log.contains("changed \(Load.adapter.rawValue)") }
        return recorder.log
    }

    @Test func aCacheFollowingAdaptersAndDevicesGetsNoCharacteristicValues() async throws {
        let log = try await Self.changes(following: [BlueZNames.adapter, BlueZNames.device])
        #expect(log == ["loaded", "added \(Self.characteristic.rawValue)", "changed \(Load.adapter.rawValue)"])
    }

    @Test func aCacheFollowingEverythingGetsThemAll() async throws {
        let log = try await Self.changes(following: nil)
        #expect(
            log == [
                "loaded", "added \(Self.characteristic.rawValue)", "value \(Self.characteristic.rawValue)",
                "changed \(Load.adapter.rawValue)",
            ])
    }
}
