import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// A Bumble peripheral (`Scripts/guest/bumble_extended_advertiser.py`) advertising with an
/// extended advertising set, far beyond the 31 bytes of a legacy advertisement, and our central
/// scanning on the Bumble-backed adapter. In the serialized end-to-end suite.
extension EndToEndTests {
    static let extendedAdvertisingService = BluetoothUUID(string: "5A1E0501-B1E2-4C00-9E00-000000000001")

    /// Bumble advertises 193 bytes in one extended (non-legacy) advertisement: the flags, a
    /// 128-bit service UUID, 142 bytes of manufacturer data (company 0xFFFF and 140 bytes) and a
    /// 26-byte complete local name. The Bumble-backed controller reports extended advertising in
    /// its LE features, so the kernel scans with the extended commands and hands bluetoothd the
    /// whole report (its log: `eir_len 193`, on every version).
    ///
    /// From bluetoothd 5.82 (tested: 5.82, 5.87) our central gets it all in `didDiscover`: the
    /// manufacturer data complete (`CBAdvertisementDataManufacturerDataKey`), the name and the
    /// service, as Core Bluetooth reports extended advertisements. bluetoothd 5.66 drops the
    /// manufacturer data: it keeps a device's advertised fields in a `bt_ad` whose
    /// `bt_ad_add_manufacturer_data` (`src/shared/ad.c`) refuses more than 27 bytes after the
    /// company (31 − 4, a legacy advertisement's room), so `Device1.ManufacturerData` never
    /// appears; the name and the service still arrive. Later bluetoothd sizes that check by the
    /// advertisement's own maximum (the version between 5.66 and 5.82 is not known here).
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 3))
    func ourCentralGetsBumblesExtendedAdvertisementWhole() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let delegate = AdvertisementRecorder()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: adapter))
        defer { central.stopScan() }
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [Self.extendedAdvertisingService])
        try await waitUntil("scanning") { central.isScanning }
        let advertiser = try BumblePeer.start(
            "bumble_extended_advertiser.py",
            ["--service", "\(Self.extendedAdvertisingService)", "--payload", "140", "--duration", "90"])
        try await advertiser.waitForEvents("advertising", timeout: .seconds(90))
        let sent = try #require(advertiser.events("advertising").first)
        #expect(sent["length"] as? Int == 193, "\(advertiser.diagnostics())")
        let seen = {
            let reports = delegate.seen
            let lengths = reports.map { "\($0.manufacturerData?.count ?? -1)/\($0.localName ?? "-")" }
            return "\(reports.count) reports (manufacturer data length/name): \(Set(lengths).sorted())"
        }
        guard emulatedBlueZ(atLeast: "5.82") else {
            try await pollUntil("discovered", timeout: .seconds(60), diagnostics: seen) { !delegate.seen.isEmpty }
            let data = try #require(delegate.seen.first)
            #expect(data.localName == "Bumble extended advertiser")
            #expect(data.serviceUUIDs == [Self.extendedAdvertisingService])
            // Dropped by bluetoothd 5.66 (see above): nothing to report.
            #expect(delegate.seen.allSatisfy { $0.manufacturerData == nil }, "\(seen())")
            central.stopScan()
            _ = try await advertiser.stop()
            return
        }
        try await pollUntil("discovered with the whole manufacturer data", timeout: .seconds(60), diagnostics: seen) {
            delegate.seen.contains { $0.manufacturerData?.count == 142 }
        }
        let data = try #require(delegate.seen.first { $0.manufacturerData?.count == 142 })
        let manufacturer = try #require(data.manufacturerData)
        #expect(manufacturer == Data([0xFF, 0xFF] + (0..<140).map { UInt8($0) }))
        #expect(manufacturer.map { String(format: "%02x", $0) }.joined() == sent["manufacturer"] as? String)
        #expect(data.localName == "Bumble extended advertiser")
        #expect(data.serviceUUIDs == [Self.extendedAdvertisingService])
        central.stopScan()
        _ = try await advertiser.stop()
    }
}

/// Records every advertisement data a scan reports.
final class AdvertisementRecorder: CentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.advertisements")
    private let state = Mutex<[AdvertisementData]>([])
    var seen: [AdvertisementData] { state.withLock { $0 } }

    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        state.withLock { $0.append(advertisementData) }
    }
}
