import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

/// Advertisers without a discoverable flag (beacons, sensors that leave the Flags field out or
/// zero it) are reported by every scan, as Core Bluetooth reports them, whatever bluetoothd's
/// version and whether the controller is LE-only. bluetoothd 5.67 and later hide them from a
/// *regular* discovery, which a filter that asks for nothing but the adapter's transport is
/// (`merge_discovery_filters`): an LE-only controller with `Transport: le` alone.
@Suite(.timeLimit(.minutes(5))) struct CentralManagerFlaglessAdvertiserTests {
    struct Setup: Sendable, CustomTestStringConvertible {
        let version: SimulatedBlueZ.Version
        let dualMode: Bool
        var testDescription: String { "\(version) \(dualMode ? "dual-mode" : "LE-only")" }
    }

    static let setups = [
        Setup(version: .bluez5_66, dualMode: false), Setup(version: .bluez5_82, dualMode: false),
        Setup(version: .bluez5_82, dualMode: true),
    ]

    /// A sensor whose advertisement has Flags 0x04 (BR/EDR not supported, not discoverable).
    static func flaglessSensor() -> SimulatedPeripheral {
        SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", name: "HRM", rssi: -52, serviceUUIDs: ["180D"], advertisingFlags: 0x04)
    }

    static func fixture(_ setup: Setup) async throws -> CentralFixture {
        try await CentralFixture.make(
            adapters: [.init(dualMode: setup.dualMode)], options: .init(version: setup.version))
    }

    @Test(arguments: setups) func aScanForAnyPeripheralReportsIt(_ setup: Setup) async throws {
        let fixture = try await Self.fixture(setup)
        let adapter = try #require(fixture.bluez.adapters.first)
        try fixture.bluez.addPeripheral(Self.flaglessSensor())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("the flag-less sensor discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        // The app gave no pattern: the empty one matches every address and keeps the discovery filtered.
        #expect(fixture.bluez.discoveryFilters(on: adapter).map(\.pattern) == [""])
    }

    /// A connection request for a peripheral bluetoothd has forgotten waits on a discovery of
    /// BlueZKit's own, which must find it even though it does not say it is discoverable.
    @Test(arguments: setups) func aPendingConnectionFindsItAgain(_ setup: Setup) async throws {
        let fixture = try await Self.fixture(setup)
        let sensor = Self.flaglessSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        fixture.central.stopScan()
        let peripheral = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral
        sensor.setInRange(false)
        fixture.central.connect(peripheral)
        try await waitUntil("connecting") { peripheral.state == .connecting }
        fixture.bluez.removeDevice(sensor)
        try await waitUntil("a background discovery looks for it") {
            fixture.bluez.adapters.first?.isDiscovering == true
        }
        sensor.setInRange(true)
        sensor.advertise()
        try await waitUntil("connected once it is back") { fixture.delegate.links == ["connected HRM connected"] }
    }
}
