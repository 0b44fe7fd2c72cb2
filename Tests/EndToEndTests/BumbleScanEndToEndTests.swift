import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// Scanning against Bumble advertisers (`Scripts/guest/bumble_changing_advertiser.py`) on the
/// Bumble-backed adapter, our centrals in-process. Proves the README rows "TX power in
/// advertisement data" and "`ScanOptions.rssiThreshold`, a non-empty `pattern`, the duplicate
/// rule", which btvirt cannot show: btvirt reports an advertisement only when advertising or
/// scanning is switched on, with no RSSI to filter, and its advertisers carry no TX Power Level.
///
/// What Bumble 0.0.236's LocalLink controller reports, and so what these tests can choose: every
/// advertising report it sends its host carries RSSI −50 dBm and, in extended reports, TX power
/// 0 (both constants in `Controller.on_advertising_pdu`, `bumble/controller.py`): the link has no
/// radio model, so RSSI can be chosen neither per advertiser nor at all. The report's TX power
/// does not reach bluetoothd either (the kernel's `hci_le_ext_adv_report_evt` passes only the
/// RSSI and the data on, and mgmt's Device Found has no TX power field), so `TxPower` comes
/// from the advertisement's TX Power Level AD field alone.
extension EndToEndTests {
    /// Bumble's fixed RSSI, in every report of its LocalLink controller (see above).
    static let bumbleLinkRSSI = -50

    /// One Bumble advertiser: a TX Power Level of −6 dBm, then three changes on command (its
    /// manufacturer data, its name, its TX power to +4 dBm) and a fourth (the manufacturer data
    /// again) that ends the sequence. Two centrals scan at once on the Bumble-backed adapter:
    ///
    /// - without `CBCentralManagerScanOptionAllowDuplicatesKey`, Core Bluetooth's rule: one
    ///   `didDiscover` per peripheral per scan, and one more for each change of its advertisement
    ///   data (a changed name included); exactly the five advertisements Bumble says it sent, in
    ///   order, however often each was repeated;
    /// - with it, every advertisement: at least three reports of each of them.
    ///
    /// The TX Power Level reaches `advertisementData` as `txPowerLevel` and under
    /// `CBAdvertisementDataTxPowerLevelKey` (an `NSNumber`), and its change is a change of the
    /// data. bluetoothd 5.66, 5.82 and 5.87 send `RSSI` again with every report of a filtered
    /// discovery (`device_set_rssi_with_delta(dev, rssi, 0)`, `src/adapter.c`; every scan of ours
    /// sets a filter) and, once any client asks for duplicates, the manufacturer data too: the
    /// central without duplicates gets a signal per report and has to keep its rule itself.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func bumblesTxPowerAndEachChangeOfItsAdvertisementReachOurCentralOnce() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let once = ScanRecorder()
        let every = ScanRecorder()
        let onceCentral = CentralManager(
            delegate: once, queue: once.queue, options: CentralManagerOptions(adapter: adapter))
        let everyCentral = CentralManager(
            delegate: every, queue: every.queue, options: CentralManagerOptions(adapter: adapter))
        defer {
            onceCentral.stopScan()
            everyCentral.stopScan()
        }
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) {
            onceCentral.state == .poweredOn && everyCentral.state == .poweredOn
        }
        let advertiser = try BumblePeer.start(
            "bumble_changing_advertiser.py", ["--name", "BZK-CHG", "--tx-power", "-6", "--duration", "200"])
        try await advertiser.waitForEvents("advertising", timeout: .seconds(30))
        // One scan start at a time: bluetoothd answers only the last of the StartDiscovery calls
        // that wait for one restart of its discovery (see `startScansOneAtATime`).
        onceCentral.scanForPeripherals(withServices: nil)
        try await pollUntil(
            "the first advertisement reported", timeout: .seconds(60), diagnostics: advertiser.diagnostics
        ) {
            !once.reports(prefix: "BZK-CHG").isEmpty
        }
        everyCentral.scanForPeripherals(
            withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        var sent: [ScanRecorder.Advertised] = []
        for change in 0...4 {
            if change > 0 {
                advertiser.send(SIGUSR1)
                try await advertiser.waitForEvents("advertising", count: change + 1, timeout: .seconds(30))
            }
            let event = advertiser.events("advertising")[change]
            let advertised = try #require(ScanRecorder.Advertised(event), "\(event)")
            sent.append(advertised)
            let seen = {
                "once: \(once.summary(prefix: "BZK-CHG")); every: \(every.summary(prefix: "BZK-CHG"))\n"
                    + advertiser.diagnostics()
            }
            let reportedAndRepeated = {
                once.reports(prefix: "BZK-CHG").contains { $0.advertised == advertised }
                    && every.reports(prefix: "BZK-CHG").filter { $0.advertised == advertised }.count >= 3
            }
            try await pollUntil(
                "change \(change) reported, and repeated with duplicates", timeout: .seconds(60), diagnostics: seen,
                reportedAndRepeated)
        }
        // Signals reach each connection in order: with change 4 reported, the central without
        // duplicates has handled every report of changes 0 to 3.
        let reports = once.reports(prefix: "BZK-CHG")
        #expect(reports.map(\.advertised) == sent, "\(once.summary(prefix: "BZK-CHG"))")
        #expect(Set(reports.map(\.peripheral)).count == 1)
        #expect(sent.map(\.txPower) == [-6, -6, -6, 4, 4])
        let first = try #require(reports.first)
        #expect(first.data.txPowerLevel == -6)
        #expect(first.data[CBAdvertisementDataTxPowerLevelKey] as? NSNumber == NSNumber(value: -6))
        #expect(first.data.dictionary[CBAdvertisementDataTxPowerLevelKey] as? Int == -6)
        #expect(reports.dropFirst(3).first?.data[CBAdvertisementDataTxPowerLevelKey] as? Int == 4)
        #expect(reports.allSatisfy { $0.rssi == Self.bumbleLinkRSSI })
        #expect(every.reports(prefix: "BZK-CHG").allSatisfy { $0.rssi == Self.bumbleLinkRSSI })
        onceCentral.stopScan()
        everyCentral.stopScan()
        _ = try await advertiser.stop()
        #expect(advertiser.events("error").isEmpty, "\(advertiser.diagnostics())")
    }

    /// Two Bumble advertisers, `BZK-PAT-A` at F1:B0:00:00:0A:01 and `BZK-OTHER` at
    /// F1:B0:00:00:0B:02, and `ScanOptions.pattern` and `ScanOptions.rssiThreshold`.
    ///
    /// Pattern (bluetoothd's `Pattern` discovery filter, from 5.54; tested 5.66, 5.82, 5.87): a
    /// central scanning for names starting "BZK-PAT" and one for addresses starting
    /// "F1:B0:00:00:0A" report `BZK-PAT-A` and never `BZK-OTHER`. While they are bluetoothd's
    /// only discovery clients bluetoothd itself filters: it takes none of the advertisements of
    /// `BZK-OTHER`, which advertised first (a device object it may make has no RSSI). Then a
    /// third central scans for everything: bluetoothd reports a device to every client once one
    /// client's pattern admits it (the empty pattern admits all, `device_is_discoverable` in
    /// `src/adapter.c`), and the two still report only `BZK-PAT-A` (the central checks the
    /// pattern itself).
    ///
    /// RSSI: Bumble's link reports −50 dBm for every advertiser, and nothing here can change it
    /// (see the top of this file), so one peer cannot be in range and the other out of it. What
    /// can be shown: a threshold above −50 (−40) reports neither, at −50 and below (−60) both,
    /// ("at or above", as bluetoothd's kernel filter). bluetoothd's own per-client check
    /// (`is_filter_match`, 5.66 to 5.87) admits every RSSI when no `Pathloss` is given; the
    /// kernel filters by the lowest threshold only when every client has one; so once another
    /// client scans, the threshold holds because the central checks it itself.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 5))
    func ourCentralsPatternAndRSSIThresholdFilterBumbleAdvertisers() async throws {
        let adapter = try #require(BumblePeer.adapters.first)
        // No discovery of an earlier test's may still run when this one starts (an unfiltered
        // one takes BZK-OTHER's advertisements and gives its device object an RSSI: seen once,
        // bluetoothd 5.66 on a loaded host), then every device is forgotten.
        try await waitUntil("\(adapter) no longer discovering", timeout: .seconds(30)) {
            try await Tool.output(
                "/usr/bin/busctl",
                ["get-property", "org.bluez", "/org/bluez/\(adapter)", "org.bluez.Adapter1", "Discovering"]
            ).contains("false")
        }
        try await ExamplePeripheral.forgetKnownDevices()
        let other = try BumblePeer.start(
            "bumble_changing_advertiser.py",
            ["--name", "BZK-OTHER", "--address", "F1:B0:00:00:0B:02", "--duration", "250"])
        try await other.waitForEvents("advertising", timeout: .seconds(30))
        let matching = try BumblePeer.start(
            "bumble_changing_advertiser.py",
            ["--name", "BZK-PAT-A", "--address", "F1:B0:00:00:0A:01", "--duration", "250"])
        try await matching.waitForEvents("advertising", timeout: .seconds(30))
        let diagnostics = { "\(matching.diagnostics())\n\(other.diagnostics())" }
        var changes = 1
        /// Makes BZK-PAT-A change its data and waits until each of `recorders` reported it: a
        /// central that did has handled every signal before it (they reach a connection in order).
        func barrier(_ recorders: [ScanRecorder]) async throws {
            changes += 1
            matching.send(SIGUSR1)
            try await matching.waitForEvents("advertising", count: changes, timeout: .seconds(30))
            let sent = try #require(ScanRecorder.Advertised(matching.events("advertising")[changes - 1]))
            try await pollUntil(
                "BZK-PAT-A's change \(changes - 1) reported", timeout: .seconds(60), diagnostics: diagnostics
            ) {
                recorders.allSatisfy { $0.reports(prefix: "BZK-PAT-A").contains { $0.advertised == sent } }
            }
        }

        // Pattern, bluetoothd's only two clients.
        let byName = ScanRecorder()
        let byAddress = ScanRecorder()
        let nameCentral = CentralManager(byName, adapter)
        let addressCentral = CentralManager(byAddress, adapter)
        defer {
            nameCentral.stopScan()
            addressCentral.stopScan()
        }
        try await startScansOneAtATime(
            [
                (nameCentral, ScanOptions(pattern: "BZK-PAT"), byName),
                (addressCentral, ScanOptions(pattern: "F1:B0:00:00:0A"), byAddress),
            ], diagnostics: diagnostics)
        try await barrier([byName, byAddress])
        // bluetoothd itself took nothing of BZK-OTHER's advertisements: its device object, if
        // any (5.78 to 5.84 make one for what the kernel calls connectable, and Bumble's link
        // reports every advertisement as connectable), has no RSSI.
        let otherRSSI = try await Tool.run(
            "/usr/bin/busctl",
            ["get-property", "org.bluez", "/org/bluez/\(adapter)/dev_F1_B0_00_00_0B_02", "org.bluez.Device1", "RSSI"])
        #expect(otherRSSI.status != 0, "bluetoothd's own Pattern filter: \(otherRSSI.output)")

        // A third client scans for everything.
        let everything = ScanRecorder()
        let everythingCentral = CentralManager(everything, adapter)
        defer { everythingCentral.stopScan() }
        try await startScansOneAtATime(
            [(everythingCentral, ScanOptions(allowDuplicates: true), everything)], diagnostics: diagnostics)
        try await pollUntil(
            "both reported, repeatedly, to the central without a pattern", timeout: .seconds(60),
            diagnostics: diagnostics
        ) {
            everything.reports(prefix: "BZK-OTHER").count >= 3 && everything.reports(prefix: "BZK-PAT-A").count >= 3
        }
        try await barrier([byName, byAddress])
        #expect(byName.reports(prefix: "BZK-OTHER").isEmpty, "\(byName.summary(prefix: "BZK"))")
        #expect(byAddress.reports(prefix: "BZK-OTHER").isEmpty, "\(byAddress.summary(prefix: "BZK"))")
        #expect(everything.reports(prefix: "BZK").allSatisfy { $0.rssi == Self.bumbleLinkRSSI })
        for central in [nameCentral, addressCentral, everythingCentral] { central.stopScan() }

        // RSSI thresholds at, below and above the link's −50 dBm; the one above starts last.
        let at = ScanRecorder()
        let below = ScanRecorder()
        let above = ScanRecorder()
        let centrals = [at, below, above].map { CentralManager($0, adapter) }
        defer { for central in centrals { central.stopScan() } }
        try await startScansOneAtATime(
            [
                (centrals[0], ScanOptions(rssiThreshold: -50), at),
                (centrals[1], ScanOptions(rssiThreshold: -60), below),
                (centrals[2], ScanOptions(rssiThreshold: -40), nil),
            ], diagnostics: diagnostics)
        try await pollUntil("both reported at and below -50 dBm", timeout: .seconds(60), diagnostics: diagnostics) {
            [at, below].allSatisfy { !$0.reports(prefix: "BZK-OTHER").isEmpty }
        }
        // The central above shares nothing to wait on; the others' barrier is its bound.
        try await barrier([at, below])
        #expect(above.reports(prefix: "BZK").isEmpty, "\(above.summary(prefix: "BZK"))")
        #expect([at, below].allSatisfy { $0.reports(prefix: "BZK").allSatisfy { $0.rssi == Self.bumbleLinkRSSI } })
        for central in centrals { central.stopScan() }
        _ = try await matching.stop()
        _ = try await other.stop()
        #expect(matching.events("error").isEmpty && other.events("error").isEmpty, "\(diagnostics())")
    }

    /// Starts each scan once the one before has reported BZK-PAT-A (its recorder; nil: the last,
    /// which reports nothing, starts without waiting), so that no two StartDiscovery calls wait at
    /// once: bluetoothd (5.66 to 5.87) keeps one pending StartDiscovery per adapter
    /// (`adapter->client` in `src/adapter.c`); when a second client's call also has to wait for
    /// the discovery to restart, the first is never answered, and that client's StopDiscovery
    /// fails with `InProgress` until its connection closes.
    func startScansOneAtATime(
        _ scans: [(CentralManager, ScanOptions, ScanRecorder?)], diagnostics: () -> String
    ) async throws {
        for (central, options, recorder) in scans {
            try await waitUntil("a central powered on", timeout: .seconds(30)) { central.state == .poweredOn }
            central.scanForPeripherals(withServices: nil, options: options)
            guard let recorder else { continue }
            try await pollUntil(
                "a scan started and reported BZK-PAT-A", timeout: .seconds(60), diagnostics: diagnostics
            ) {
                !recorder.reports(prefix: "BZK-PAT-A").isEmpty
            }
        }
    }
}

extension CentralManager {
    /// A central on `adapter` whose delegate is `recorder`, on its queue.
    fileprivate convenience init(_ recorder: ScanRecorder, _ adapter: String) {
        self.init(delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: adapter))
    }
}

/// Records every `didDiscover`: the peripheral, its advertisement data and RSSI.
final class ScanRecorder: CentralManagerDelegate, @unchecked Sendable {
    struct Report: Sendable {
        let peripheral: UUID
        let data: AdvertisementData
        let rssi: Int
        var advertised: Advertised {
            Advertised(
                name: data.localName ?? "", manufacturer: data.manufacturerData ?? Data(), txPower: data.txPowerLevel)
        }
    }

    /// What `bumble_changing_advertiser.py` says it advertises, or what a report carries of it.
    struct Advertised: Equatable, Sendable, CustomStringConvertible {
        let name: String
        let manufacturer: Data
        let txPower: Int?
        var description: String {
            "\(name)/\(manufacturer.map { String(format: "%02x", $0) }.joined())/\(txPower.map(String.init) ?? "-")"
        }

        init(name: String, manufacturer: Data, txPower: Int?) {
            self.name = name
            self.manufacturer = manufacturer
            self.txPower = txPower
        }

        /// From an "advertising" event of the peer.
        init?(_ event: [String: Any]) {
            guard let name = event["name"] as? String, let hex = event["manufacturer"] as? String,
                let txPower = event["txPower"] as? Int
            else { return nil }
            let bytes = stride(from: 0, to: hex.count, by: 2).compactMap { offset -> UInt8? in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)
            }
            self.init(name: name, manufacturer: Data(bytes), txPower: txPower)
        }
    }

    let queue = DispatchQueue(label: "e2e.scan")
    private let state = Mutex<[Report]>([])

    /// The reports of peripherals whose advertised name starts with `prefix`.
    func reports(prefix: String) -> [Report] {
        state.withLock { $0.filter { $0.data.localName?.hasPrefix(prefix) == true } }
    }

    func summary(prefix: String) -> String {
        let reports = reports(prefix: prefix).map { "\($0.advertised)@\($0.rssi)" }
        return "\(reports.count) reports, the last 20: \(reports.suffix(20))"
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        state.withLock { $0.append(Report(peripheral: peripheral.identifier, data: advertisementData, rssi: RSSI)) }
    }
}
