import BlueZKitTesting
import DBus
import TestSupport
import Testing

/// Which discovery filters bluetoothd treats as no filter at all, and so as a regular discovery
/// that hides LE advertisers without a discoverable flag: since 5.67 (de8e7cfce) a filter that
/// sets nothing but the adapter's own transport; in 5.66 only an empty one.
@Suite(.timeLimit(.minutes(5))) struct RegularDiscoveryTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let version: SimulatedBlueZ.Version
        let dualMode: Bool
        let filter: [String: DBusValue]
        let findsTheBeacon: Bool
        var testDescription: String {
            "\(version) \(dualMode ? "dual-mode" : "LE-only") \(filter.keys.sorted()) → \(findsTheBeacon)"
        }
    }

    static let cases: [Case] = [
        // 5.66: any filter makes the discovery a filtered one.
        Case(version: .bluez5_66, dualMode: false, filter: ["Transport": .string("le")], findsTheBeacon: true),
        // 5.67 and later: the adapter's own transport and nothing else is a regular discovery…
        Case(version: .bluez5_82, dualMode: false, filter: ["Transport": .string("le")], findsTheBeacon: false),
        Case(version: .bluez5_82, dualMode: false, filter: ["UUIDs": .stringArray([])], findsTheBeacon: false),
        Case(
            version: .bluez5_82, dualMode: false,
            filter: ["Transport": .string("le"), "DuplicateData": .bool(false)], findsTheBeacon: false),
        Case(version: .bluez5_82, dualMode: true, filter: ["Transport": .string("auto")], findsTheBeacon: false),
        // …while a transport other than the adapter's, or a pattern, even empty, is a filtered one.
        Case(version: .bluez5_82, dualMode: true, filter: ["Transport": .string("le")], findsTheBeacon: true),
        Case(
            version: .bluez5_82, dualMode: false, filter: ["Transport": .string("le"), "Pattern": .string("")],
            findsTheBeacon: true),
        Case(
            version: .bluez5_82, dualMode: false,
            filter: ["Transport": .string("le"), "DuplicateData": .bool(true)], findsTheBeacon: true),
    ]

    @Test(arguments: cases) func aFlaglessAdvertiserIsFoundOnlyByAFilteredDiscovery(_ test: Case) async throws {
        let rig = try await Rig.start(
            adapters: [.init(dualMode: test.dualMode)], options: .init(version: test.version))
        defer { rig.stop() }
        // Not connectable: from 5.78 a regular discovery creates a device for a connectable one
        // (below).
        let beacon = SimulatedPeripheral(address: "C0:FF:EE:00:00:01", advertisingFlags: 0x04, isConnectable: false)
        let flagged = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", advertisingFlags: 0x06)
        try rig.bluez.addPeripheral(beacon)
        try rig.bluez.addPeripheral(flagged)
        try await rig.client.call(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(test.filter)])
        try await startDiscovery(rig.client)
        // Both are reported in one turn, the beacon first: once the flagged one is in, so is it.
        _ = await rig.client.signals.expect("the flagged one found") {
            $0.member == "InterfacesAdded" && $0.objectPath == "/org/bluez/hci0/dev_C0_FF_EE_00_00_02"
        }
        let objects = try await rig.client.managedObjects()
        #expect((objects["/org/bluez/hci0/dev_C0_FF_EE_00_00_01"] != nil) == test.findsTheBeacon)
    }

    /// From 5.78 ("adapter: Create devices if they are connectable"), as the real 5.82 does
    /// (DiscoveryConformance): a regular discovery creates a device for a connectable advertiser
    /// without a discoverable flag, though it reports nothing more of it (no RSSI, no name).
    @Test func aRegularDiscoveryCreatesADeviceForAConnectableFlaglessAdvertiser() async throws {
        let rig = try await Rig.start(adapters: [.init(dualMode: false)], options: .init(version: .bluez5_82))
        defer { rig.stop() }
        let connectable = SimulatedPeripheral(address: "C0:FF:EE:00:00:03", name: "hidden", advertisingFlags: 0x04)
        try rig.bluez.addPeripheral(connectable)
        try await rig.client.call(
            adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(["Transport": .string("le")])])
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect("the connectable one created") {
            $0.member == "InterfacesAdded" && $0.objectPath == "/org/bluez/hci0/dev_C0_FF_EE_00_00_03"
        }
        let device = try await rig.client.managedObjects()["/org/bluez/hci0/dev_C0_FF_EE_00_00_03"]
        #expect(device?["org.bluez.Device1"]?["Name"] == nil)
        #expect(device?["org.bluez.Device1"]?["RSSI"] == nil)
    }
}
