import BlueZKit
import Foundation
import TestSupport
import Testing

/// Advertising options (issue 37 item 3) judged by what reaches a Bumble scanner
/// (`Scripts/guest/bumble_advertisement_scanner.py`): our peripheral advertises on the
/// Bumble-backed adapter, whose controller does extended advertising (LE 2M and Coded), and on
/// one of btvirt's legacy-only controllers, where the options it cannot do are refused with a
/// typed error. The guest's bluetoothd runs with `-E`, so 5.66 honours intervals and TX power too.
///
/// Bumble's emulated link carries neither the PHY nor the legacy/extended kind of a PDU to the
/// scanner (its controller reports every advertisement as extended on 1M): the secondary PHY is
/// judged by bluetoothd taking it and the advertisement arriving, the extended PDU by data longer
/// than a legacy advertisement's 31 bytes arriving whole.
extension EndToEndTests {
    static let optionsService = BluetoothUUID(string: "5A1E0601-B1E2-4C00-9E00-000000000001")

    /// Runs the scanner for `seconds` of reports from our advertiser; its report.
    private func scanReport(seconds: Int = 6) async throws -> (ExampleProgram, [String: Any]) {
        let scanner = try BumblePeer.start(
            "bumble_advertisement_scanner.py",
            ["--service", "\(Self.optionsService)", "--duration", "\(seconds)", "--timeout", "150"])
        try await scanner.waitForEvents("scanning", timeout: .seconds(90))
        let report = try await scanner.waitForEvents("report", timeout: .seconds(120)).first ?? [:]
        _ = try await scanner.stop()
        // What was measured, for the log (the bounds below are loose).
        print("bumble_advertisement_scanner (bluetoothd \(emulatedBlueZVersion)): \(report)")
        return (scanner, report)
    }

    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 6))
    func advertisingOptionsGoOnTheAirFromBumblesController() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: adapter))
        defer { manager.stopAdvertising() }
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let data = AdvertisementData(manufacturerData: Data([0xFF, 0xFF, 1, 2]), serviceUUIDs: [Self.optionsService])

        // A short interval, a TX power, its field and a 2M secondary channel: all taken.
        let fast = AdvertisingOptions(
            interval: .milliseconds(100) ... .milliseconds(100), txPower: -4, includesTxPower: true,
            secondaryPHY: .le2M)
        try await manager.startAdvertising(with: data, options: fast)
        #expect(manager.advertisingOptions == fast)
        let (first, fastReport) = try await scanReport()
        let fastGap = try #require(fastReport["median_gap_ms"] as? Double, "\(first.diagnostics())")
        // Bumble's controller sends each advertisement after the minimum interval; the kernel's
        // default is 1.28 s. Loose bounds: the guest is emulated.
        #expect((70...400).contains(fastGap), "\(first.diagnostics())")
        #expect(fastReport["tx_power_field"] is Int, "TX Power Level field: \(first.diagnostics())")
        #expect(fastReport["manufacturer"] as? String == "ffff0102", "\(first.diagnostics())")
        manager.stopAdvertising()
        try await waitUntil("advertising stopped") { !manager.isAdvertising }

        // A longer interval: the gaps follow it.
        try await manager.startAdvertising(
            with: data, options: AdvertisingOptions(interval: .milliseconds(700) ... .milliseconds(700)))
        let (second, slowReport) = try await scanReport(seconds: 8)
        let slowGap = try #require(slowReport["median_gap_ms"] as? Double, "\(second.diagnostics())")
        #expect((550...1100).contains(slowGap), "\(second.diagnostics())")
        #expect(slowReport["tx_power_field"] is NSNull || slowReport["tx_power_field"] == nil)
        manager.stopAdvertising()
        try await waitUntil("advertising stopped") { !manager.isAdvertising }

        // 100 bytes of manufacturer data: an extended advertisement from 5.79, refused before.
        let long = AdvertisementData(
            manufacturerData: Data([0xFF, 0xFF] + (0..<98).map { UInt8($0) }), serviceUUIDs: [Self.optionsService])
        guard emulatedBlueZ(atLeast: "5.82") else {
            do {
                try await manager.startAdvertising(with: long)
                Issue.record("bluetoothd \(emulatedBlueZVersion) took 104 bytes of advertising data")
            } catch let error as BluetoothError {
                #expect(error.code == .advertisingDataTooLarge, "\(error)")
            }
            return
        }
        try await manager.startAdvertising(with: long, options: AdvertisingOptions(secondaryPHY: .leCoded))
        let (third, longReport) = try await scanReport(seconds: 3)
        let lengths = try #require(longReport["lengths"] as? [Int], "\(third.diagnostics())")
        #expect(lengths.allSatisfy { $0 > 31 }, "\(third.diagnostics())")
        #expect(
            longReport["manufacturer"] as? String
                == (Data([0xFF, 0xFF] + (0..<98).map { UInt8($0) }))
                .map { String(format: "%02x", $0) }.joined(), "\(third.diagnostics())")
    }

    @Test(.loadScaledTimeLimit(minutes: 3))
    func aLegacyControllerRefusesWhatItCannotDo() async throws {
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        defer { manager.stopAdvertising() }
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let data = AdvertisementData(serviceUUIDs: [Self.optionsService])
        for options in [AdvertisingOptions(secondaryPHY: .le2M), AdvertisingOptions(txPower: 0)] {
            do {
                try await manager.startAdvertising(with: data, options: options)
                Issue.record("btvirt's controller took \(options)")
                manager.stopAdvertising()
            } catch let error as BluetoothError {
                #expect(error.code == .operationNotSupported, "\(error)")
            }
        }
        #expect(!manager.isAdvertising)
        // An interval needs no extended advertising: taken (bluetoothd runs with -E on 5.66).
        try await manager.startAdvertising(
            with: data, options: AdvertisingOptions(interval: .milliseconds(200) ... .milliseconds(300)))
        #expect(manager.isAdvertising)
        // bluetoothd's own range check, before it is asked.
        manager.stopAdvertising()
        await #expect(throws: BluetoothError.self) {
            try await manager.startAdvertising(
                with: data, options: AdvertisingOptions(interval: .milliseconds(10) ... .milliseconds(30)))
        }
    }
}
