import BlueZKit
import BlueZKitTesting
import Locking
import TestSupport
import Testing

/// `connect` while the app's scan runs: the kernel would not start the connection while a
/// discovery runs (it waits for the device's next advertising report, up to the discovery's
/// 10 s), so the engine pauses its own discovery session for the attempt and resumes it after.
@Suite(.timeLimit(.minutes(2))) struct CentralConnectDuringScanTests {
    /// Scans for everything and returns the discovered heart-rate sensor.
    static func scanning(_ fixture: CentralFixture) async throws -> Peripheral {
        try fixture.bluez.addPeripheral(CentralManagerScanTests.heartRateSensor())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        return try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral
    }

    @Test func theConnectReachesBluetoothdWithOurDiscoveryPaused() async throws {
        let fixture = try await CentralFixture.make()
        let peripheral = try await Self.scanning(fixture)
        let adapter = try #require(fixture.bluez.adapters.first)
        try await waitUntil("discovering") { adapter.isDiscovering }
        // The Connect stays unanswered: the pause ends by its limit, not with the attempt.
        fixture.bluez.inject(.noReply, for: .connect)
        // Our session stops for the attempt (the engine sends the Connect once the stop is
        // answered). Watched as it happens rather than looked at once the Connect is in: the pause
        // ends by its limit (2 s, not scaled), which a loaded machine can pass before the test
        // looks (ThreadSanitizer beside the whole tier on Debian 13, 2026-12-07).
        let sawPause = PosixMutex(false)
        let watcher = Task {
            while !Task.isCancelled {
                if adapter.discoverySessionCount == 0, !adapter.isDiscovering {
                    sawPause.withLock { $0 = true }
                    return
                }
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
        defer { watcher.cancel() }
        fixture.central.connect(peripheral)
        try await waitUntil("Connect reached bluetoothd") { fixture.bluez.unfiredFaultCount == 0 }
        try await waitUntil("our discovery paused for the attempt") { sawPause.withLock { $0 } }
        // The app's scan has not stopped, as on Core Bluetooth.
        #expect(fixture.central.isScanning)
        try await waitUntil("discovering again after the pause's limit", timeout: .seconds(10)) {
            adapter.isDiscovering
        }
        #expect(fixture.central.isScanning)
    }

    @Test func theScanGoesOnReportingOnceConnected() async throws {
        let fixture = try await CentralFixture.make()
        let peripheral = try await Self.scanning(fixture)
        let adapter = try #require(fixture.bluez.adapters.first)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { fixture.delegate.links == ["connected HRM connected"] }
        try await waitUntil("discovering again") { adapter.isDiscovering && adapter.discoverySessionCount == 1 }
        try fixture.bluez.addPeripheral(CentralManagerScanTests.heartRateSensor("C0:FF:EE:00:00:02", name: "HRM2"))
        try await waitUntil("a peripheral that came later is reported") {
            !fixture.delegate.discoveries(named: "HRM2").isEmpty
        }
        #expect(fixture.central.isScanning)
    }

    /// Failed attempts retried at once do not stop and start our discovery each time.
    @Test func retriesSoonAfterAPauseDoNotPauseAgain() async throws {
        let fixture = try await CentralFixture.make()
        let peripheral = try await Self.scanning(fixture)
        let adapter = try #require(fixture.bluez.adapters.first)
        try await waitUntil("discovering") { adapter.isDiscovering }
        // Marks each StopDiscovery (a 1 ms delay): three are ready, at most two may fire.
        fixture.bluez.inject(.delay(.milliseconds(1)), for: .stopDiscovery, count: 3)
        fixture.bluez.inject(
            .error(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), for: .connect, count: 2)
        fixture.central.connect(peripheral)
        try await waitUntil("connected after two failures") { fixture.delegate.links == ["connected HRM connected"] }
        try await waitUntil("discovering again") { adapter.isDiscovering }
        // The first attempt pauses; the retries follow within the spacing (at once, or after the
        // 250 ms back-off).
        #expect(fixture.bluez.unfiredFaultCount >= 1)
        #expect(fixture.central.isScanning)
    }

    @Test func withoutAScanDiscoveryIsLeftAlone() async throws {
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(CentralManagerScanTests.heartRateSensor())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        fixture.central.stopScan()
        let adapter = try #require(fixture.bluez.adapters.first)
        try await waitUntil("not discovering") { !adapter.isDiscovering }
        let peripheral = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral
        // No scan of ours: a connect leaves discovery alone (nothing to pause or resume).
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { fixture.delegate.links == ["connected HRM connected"] }
        #expect(!adapter.isDiscovering)
    }
}
