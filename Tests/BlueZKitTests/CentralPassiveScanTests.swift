import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Passive scanning through the simulated `AdvertisementMonitorManager1`.
@Suite(.timeLimit(.minutes(5))) struct CentralPassiveScanTests {
    /// A simulated BlueZ (with or without the monitor manager) and a powered-on central.
    static func fixture(advertisementMonitor: Bool = true) async throws -> CentralFixture {
        let bluez = try await SimulatedBlueZ.start(options: .init(advertisementMonitor: advertisementMonitor))
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("the central is powered on") { central.state == .poweredOn }
        return CentralFixture(bluez: bluez, delegate: delegate, central: central)
    }

    static let tag = Data([0x70, 0x74])

    static func beacon(
        _ address: String = "C0:FF:EE:00:00:01", name: String = "Tagged", payload: [UInt8] = [0x70, 0x74]
    )
        -> SimulatedPeripheral
    {
        SimulatedPeripheral(address: address, name: name, rssi: -48, manufacturerData: [0xFFFF: payload])
    }

    static func taggedScan(rssi: RSSIThresholds? = nil) throws(BluetoothError) -> ScanOptions {
        ScanOptions(
            passive: try PassiveScan(
                patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: tag)], rssiThresholds: rssi))
    }

    @Test func discoversOnlyPeripheralsWhoseAdvertisementMatches() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let tagged = Self.beacon()
        let other = Self.beacon("C0:FF:EE:00:00:02", name: "Other", payload: [0x01, 0x02])
        try fixture.bluez.addPeripheral(other)
        try fixture.bluez.addPeripheral(tagged)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        #expect(fixture.central.isScanning)
        try await waitUntil("the tagged peripheral is discovered") {
            !fixture.delegate.discoveries(named: "Tagged").isEmpty
        }
        // The other one advertises before the tagged one's changed data: once that change is
        // reported, the other's advertisement was seen, and not reported.
        other.advertise()
        tagged.manufacturerData = [0xFFFF: [0x70, 0x74, 0x02]]
        tagged.advertise()
        try await waitUntil("the changed advertisement is reported") {
            fixture.delegate.discoveries(named: "Tagged").last?.data.manufacturerData
                == Data([0xFF, 0xFF, 0x70, 0x74, 0x02])
        }
        #expect(fixture.delegate.discoveries(named: "Other").isEmpty)
        let first = try #require(fixture.delegate.discoveries(named: "Tagged").first)
        #expect(first.rssi == -48)
        #expect(first.data.manufacturerData == Data([0xFF, 0xFF, 0x70, 0x74]))
        // Passive: no discovery session, one monitor with our pattern.
        let adapter = try #require(fixture.bluez.adapters.first)
        #expect(!adapter.isDiscovering)
        let monitor = try #require(adapter.registeredMonitors.first)
        #expect(monitor.patterns.map(\.content) == [[0xFF, 0xFF, 0x70, 0x74]])
        #expect(monitor.patterns.map(\.adType) == [0xFF])
        #expect(monitor.rssiHighThreshold == nil)
        #expect(fixture.delegate.offQueueCalls == 0)
    }

    @Test func ignoresDevicesThatAnotherClientsDiscoveryReports() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let other = Self.beacon("C0:FF:EE:00:00:02", name: "Other", payload: [0x01, 0x02])
        try fixture.bluez.addPeripheral(other)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        // Another process scans actively: bluetoothd reports every device to every client.
        let activeDelegate = RecordingCentralDelegate()
        let active = CentralManager(
            delegate: activeDelegate, queue: activeDelegate.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("the second central is powered on") { active.state == .poweredOn }
        active.scanForPeripherals(withServices: nil)
        try await waitUntil("the active scan sees Other") { !activeDelegate.discoveries(named: "Other").isEmpty }
        try fixture.bluez.addPeripheral(Self.beacon())
        try await waitUntil("the passive scan sees Tagged") { !fixture.delegate.discoveries(named: "Tagged").isEmpty }
        other.manufacturerData = [0x0001: [0x03]]
        other.advertise()
        try await waitUntil("the active scan sees Other's change") {
            activeDelegate.discoveries(named: "Other").count == 2
        }
        #expect(fixture.delegate.discoveries(named: "Other").isEmpty)
    }

    @Test func reportsAMatchingPeripheralOnceWithoutDuplicates() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let tagged = Self.beacon()
        let marker = Self.beacon("C0:FF:EE:00:00:03", name: "Marker")
        try fixture.bluez.addPeripheral(tagged)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        try await waitUntil("first report") { fixture.delegate.discoveries(named: "Tagged").count == 1 }
        // The simulated bluetoothd calls DeviceFound for every matching advertisement.
        tagged.advertise()
        tagged.advertise()
        try fixture.bluez.addPeripheral(marker)
        try await waitUntil("the marker is reported") { !fixture.delegate.discoveries(named: "Marker").isEmpty }
        #expect(fixture.delegate.discoveries(named: "Tagged").count == 1)
    }

    @Test func failsNamingTheFlagWhenBluetoothdHasNoMonitorManager() async throws {
        let fixture = try await Self.fixture(advertisementMonitor: false)
        defer { fixture.bluez.stop() }
        try fixture.bluez.addPeripheral(Self.beacon())
        do throws(BluetoothError) {
            try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
            Issue.record("a passive scan started without AdvertisementMonitorManager1")
        } catch {
            #expect(error.code == .advertisementMonitorUnavailable)
            #expect(error.message.contains("--experimental"))
            #expect(error.message.contains("-E"))
        }
        #expect(!fixture.central.isScanning)
        #expect(fixture.bluez.adapters.first?.registeredMonitors.isEmpty == true)
        // The delegate form cannot throw: the scan ends by itself (isScanning turns true at the
        // call and false once the failure is known, which may already have happened here).
        fixture.central.scanForPeripherals(withServices: nil, options: try Self.taggedScan())
        try await waitUntil("the failed passive scan ends") { !fixture.central.isScanning }
        #expect(fixture.delegate.discoveries.isEmpty)
    }

    @Test func stopScanUnregistersTheMonitor() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let adapter = try #require(fixture.bluez.adapters.first)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        #expect(adapter.registeredMonitors.count == 1)
        let path = try #require(adapter.registeredMonitors.first?.path)
        fixture.central.stopScan()
        #expect(!fixture.central.isScanning)
        try await waitUntil("the monitor is unregistered") { adapter.registeredMonitors.isEmpty }
        try await waitUntil("bluetoothd released it") { adapter.releasedMonitors == [path] }
    }

    /// bluetoothd may take its time (here: `RegisterMonitor` unanswered for a minute): cancelling
    /// the caller's task ends the wait and the scan.
    @Test func cancellingTheCallerStopsAPassiveScanThatHasNotStarted() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let registerMonitor = SimulatedMethod(
            interface: "org.bluez.AdvertisementMonitorManager1", member: "RegisterMonitor")
        fixture.bluez.inject(.delay(.seconds(60)), for: registerMonitor)
        let central = fixture.central
        let scan = try Self.taggedScan()
        let task = Task { () -> BluetoothError? in
            do throws(BluetoothError) {
                try await central.scanPassively(withServices: nil, options: scan)
                return nil
            } catch {
                return error
            }
        }
        try await waitUntil("RegisterMonitor reached bluetoothd") { fixture.bluez.unfiredFaultCount == 0 }
        #expect(central.isScanning)
        task.cancel()
        let error = await task.value
        #expect(error?.code == .operationCancelled)
        #expect(!central.isScanning)
    }

    @Test func anActiveScanReplacesAPassiveOne() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let adapter = try #require(fixture.bluez.adapters.first)
        try fixture.bluez.addPeripheral(Self.beacon("C0:FF:EE:00:00:02", name: "Other", payload: [0x01]))
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("the monitor is replaced by discovery") {
            adapter.registeredMonitors.isEmpty && adapter.isDiscovering
        }
        try await waitUntil("the active scan reports every peripheral") {
            !fixture.delegate.discoveries(named: "Other").isEmpty
        }
        #expect(adapter.releasedMonitors.count == 1)
    }

    @Test func aNewPassiveScanReplacesTheFirstMonitor() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let adapter = try #require(fixture.bluez.adapters.first)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan())
        let byName = ScanOptions(passive: try PassiveScan(patterns: [.localName(prefix: "Oth")]))
        try await fixture.central.scanPassively(withServices: nil, options: byName)
        try await waitUntil("one monitor, the second") {
            adapter.registeredMonitors.map(\.patterns.first?.adType) == [0x09]
        }
        try fixture.bluez.addPeripheral(Self.beacon("C0:FF:EE:00:00:02", name: "Other", payload: [0x01]))
        try await waitUntil("matched by name") { !fixture.delegate.discoveries(named: "Other").isEmpty }
        #expect(adapter.releasedMonitors.count == 1)
    }

    @Test func resumesPassivelyAfterBluetoothdRestarts() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let thresholds = try RSSIThresholds(highThreshold: -70, lowThreshold: -90)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan(rssi: thresholds))
        try await fixture.bluez.restart()
        try await waitUntil("the scan resumed with a monitor") {
            fixture.central.isScanning && fixture.bluez.adapters.first?.registeredMonitors.count == 1
        }
        let monitor = try #require(fixture.bluez.adapters.first?.registeredMonitors.first)
        #expect(monitor.patterns.map(\.content) == [[0xFF, 0xFF, 0x70, 0x74]])
        #expect(monitor.rssiHighThreshold == -70)
        #expect(fixture.bluez.adapters.first?.isDiscovering == false)
        try fixture.bluez.addPeripheral(Self.beacon("C0:FF:EE:00:00:02", name: "Other", payload: [0x01]))
        try fixture.bluez.addPeripheral(Self.beacon())
        try await waitUntil("the tagged peripheral is discovered") {
            !fixture.delegate.discoveries(named: "Tagged").isEmpty
        }
        #expect(fixture.delegate.discoveries(named: "Other").isEmpty)
    }

    @Test func sendsTheRSSIThresholds() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let thresholds = try RSSIThresholds(
            highThreshold: -60, highTimeout: 2, lowThreshold: -80, lowTimeout: 7, samplingPeriod: 0)
        try await fixture.central.scanPassively(withServices: nil, options: Self.taggedScan(rssi: thresholds))
        let monitor = try #require(fixture.bluez.adapters.first?.registeredMonitors.first)
        #expect(monitor.rssiHighThreshold == -60)
        #expect(monitor.rssiHighTimeout == 2)
        #expect(monitor.rssiLowThreshold == -80)
        #expect(monitor.rssiLowTimeout == 7)
        #expect(monitor.rssiSamplingPeriod == 0)
    }

    @Test func filtersByServiceAsAnActiveScanDoes() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        let plain = Self.beacon()
        let withService = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:04", name: "Service", serviceUUIDs: ["180D"],
            manufacturerData: [0xFFFF: [0x70, 0x74]])
        try fixture.bluez.addPeripheral(plain)
        try fixture.bluez.addPeripheral(withService)
        try await fixture.central.scanPassively(withServices: [BluetoothUUID(0x180D)], options: Self.taggedScan())
        try await waitUntil("the one with the service") { !fixture.delegate.discoveries(named: "Service").isEmpty }
        plain.advertise()
        withService.manufacturerData = [0xFFFF: [0x70, 0x74, 0x09]]
        withService.advertise()
        try await waitUntil("its change") { fixture.delegate.discoveries(named: "Service").count == 2 }
        #expect(fixture.delegate.discoveries(named: "Tagged").isEmpty)
    }

    @Test func aScanWithoutPassiveOptionsIsRefused() async throws {
        let fixture = try await Self.fixture()
        defer { fixture.bluez.stop() }
        await #expect(
            throws: BluetoothError(.invalidParameters, message: "ScanOptions.passive is nil: this is no passive scan")
        ) {
            try await fixture.central.scanPassively(withServices: nil, options: ScanOptions())
        }
        #expect(!fixture.central.isScanning)
    }

    @Test func theDictionaryKeyCarriesThePassiveScan() throws {
        let scan = try PassiveScan(patterns: [.localName(prefix: "HR")])
        #expect(ScanOptions(dictionary: [BlueZKitScanOptionPassiveKey: scan]).passive == scan)
        #expect(ScanOptions(dictionary: [BlueZKitScanOptionPassiveKey: "HR"]).passive == nil)
    }
}
