import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the other end-to-end tests: they all use hci0 and hci1.
extension EndToEndTests {
    /// How long a central whose pattern does not match is given to (wrongly) discover our
    /// peripheral once a matching central on the same adapter has: bluetoothd matches every
    /// monitor against the same advertisement report (`adv_monitor_device_found_callback` in
    /// src/adv_monitor.c), so a wrong `DeviceFound` would arrive together with the right one;
    /// 3 s leaves room for a slow emulated guest.
    static let passiveMissBound = Duration.seconds(3)

    /// Records passive discoveries with their manufacturer data.
    final class PassiveRecorder: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "e2e.passive")
        private let found = Mutex<[(Peripheral, Data?)]>([])
        var discoveries: [(Peripheral, Data?)] { found.withLock { $0 } }
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi RSSI: Int
        ) {
            found.withLock { $0.append((peripheral, advertisementData.manufacturerData)) }
        }
    }

    /// Our central on hci0 scans passively (AdvertisementMonitor1, bluetoothd's `-E`) for our
    /// peripheral on hci1; a second central with a pattern that does not match does not find it.
    @Test(.loadScaledTimeLimit(minutes: 3)) func ourPassiveCentralFindsOnlyMatchingAdvertisements() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let matching = PassiveRecorder()
        let missing = PassiveRecorder()
        let matchCentral = CentralManager(
            delegate: matching, queue: matching.queue, options: CentralManagerOptions(adapter: "hci0"))
        let missCentral = CentralManager(
            delegate: missing, queue: missing.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) {
            matchCentral.state == .poweredOn && missCentral.state == .poweredOn
        }
        let tag = Data([0x70, 0x74])
        try await matchCentral.scanPassively(
            withServices: nil,
            options: ScanOptions(
                passive: try PassiveScan(patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: tag)])))
        try await missCentral.scanPassively(
            withServices: nil,
            options: ScanOptions(
                passive: try PassiveScan(
                    patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: Data([0x70, 0x75]))])))
        #expect(matchCentral.isScanning && missCentral.isScanning)
        // bluetoothd accepts thresholds in range (it calls Activate); btvirt's reports carry no
        // RSSI (127) and come once per scan, so a thresholded monitor finds nothing here.
        let thresholded = PassiveRecorder()
        let thresholdCentral = CentralManager(
            delegate: thresholded, queue: thresholded.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on (third central)", timeout: .seconds(30)) {
            thresholdCentral.state == .poweredOn
        }
        try await thresholdCentral.scanPassively(
            withServices: nil,
            options: ScanOptions(
                passive: try PassiveScan(
                    patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: tag)],
                    rssiThresholds: try RSSIThresholds(highThreshold: -100, highTimeout: 1, lowThreshold: -110))))

        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "BZKP",
            CBAdvertisementDataManufacturerDataKey: Data([0xFF, 0xFF, 0x70, 0x74, 0x01]),
        ])
        try await waitUntil("advertising", timeout: .seconds(30)) { server.log.contains("advertising") }
        try await waitUntil("the matching central discovered our peripheral", timeout: .seconds(60)) {
            !matching.discoveries.isEmpty
        }
        let (peripheral, data) = try #require(matching.discoveries.first)
        #expect(peripheral.address == (try await BluetoothctlSession.address(of: "hci1")))
        #expect(data == Data([0xFF, 0xFF, 0x70, 0x74, 0x01]))
        try await Task.sleep(for: Self.passiveMissBound)
        #expect(missing.discoveries.isEmpty)

        // stopScan unregisters: bluetoothd (`-d`) logs the release of the monitor it destroys
        // (`monitor_release` in src/adv_monitor.c, 5.66 and 5.82 alike); the other monitors stay.
        let logStart = EndToEndScope.logSize()
        matchCentral.stopScan()
        #expect(!matchCentral.isScanning)
        try await waitUntil("bluetoothd released the monitor", timeout: .seconds(30)) {
            Self.bluetoothdLog(from: logStart).contains("Calling Release() on Adv Monitor")
        }
        #expect(Self.bluetoothdLog(from: logStart).components(separatedBy: "Calling Release()").count - 1 == 1)
        missCentral.stopScan()
        thresholdCentral.stopScan()
        manager.stopAdvertising()
    }

    /// bluetoothd's log written since `offset` bytes (empty when unreadable).
    /// bluetoothd restarted without `-E`: it then offers no AdvertisementMonitorManager1 (5.66
    /// and 5.82 create it only with the experimental flag, `src/adapter.c`), and a passive scan
    /// throws ``BluetoothError/Code/advertisementMonitorUnavailable`` naming the flag, with
    /// nothing scanning; bluetoothd is started again with its own command line after.
    @Test(.loadScaledTimeLimit(minutes: 3)) func withoutExperimentalAPassiveScanNamesTheMissingFlag() async throws {
        let original = try #require(Bluetoothd.commandLine(), "bluetoothd is running")
        let plain = original.filter { $0 != "-E" && $0 != "--experimental" }
        #expect(plain.count < original.count, "the guest runs bluetoothd with -E: \(original)")
        try await Bluetoothd.restart(with: plain)
        do {
            try await Bluetoothd.waitUntilAdaptersPowered()
            let interfaces = try await Tool.output(
                "/usr/bin/busctl", ["introspect", "org.bluez", "/org/bluez/hci0"], timeout: .seconds(10))
            #expect(!interfaces.contains("org.bluez.AdvertisementMonitorManager1"))
            let recorder = PassiveRecorder()
            let central = CentralManager(
                delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: "hci0"))
            try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
            let options = ScanOptions(
                passive: try PassiveScan(patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: Data([1]))]))
            do throws(BluetoothError) {
                try await central.scanPassively(withServices: nil, options: options)
                Issue.record("a passive scan started on a bluetoothd without -E")
                central.stopScan()
            } catch {
                #expect(error.code == .advertisementMonitorUnavailable)
                #expect(error.message.contains("-E"), "\(error.message)")
                #expect(!central.isScanning)
            }
        } catch {
            try? await Bluetoothd.restart(with: original)
            throw error
        }
        try await Bluetoothd.restart(with: original)
        try await Bluetoothd.waitUntilAdaptersPowered()
    }

    static func bluetoothdLog(from offset: UInt64) -> String {
        guard let handle = FileHandle(forReadingAtPath: EndToEndScope.bluetoothdLog) else { return "" }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }
}
