import BlueZKit
import Foundation
import TestSupport
import Testing

/// README rows "Pairing on demand" and "Connect by address": `Peripheral.pair()`,
/// `setTrusted(_:)` and `CentralManager.connect(toAddress:type:)` against the real bluetoothd,
/// with Bumble's SMP as the peer and judge (`Scripts/guest/bumble_pairing_peripheral.py`, whose
/// `paired` event says whether the keys are authenticated).
///
/// `Pair` goes out on the manager's connection, where its agent is registered (and, as in every
/// test of the judge, bluetoothd's default agent). In the serialized end-to-end suite.
extension EndToEndTests {
    /// How the pairing is authenticated: Bumble's `--io`, our delegate's capability.
    enum PairMethod: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case justWorks, passkeyEntry, numericComparison
        var testDescription: String { rawValue }
        var bumbleIO: String {
            switch self {
            case .justWorks: "no-input-no-output"
            case .passkeyEntry: "display-only"
            case .numericComparison: "display-yes-no"
            }
        }
    }

    /// `pair()` pairs before any read, by each method: just works with no delegate (Bumble's
    /// keys unauthenticated), passkey entry (our delegate types what Bumble shows) and numeric
    /// comparison (our delegate is asked to confirm Bumble's number): Bumble's keys
    /// authenticated, LE Secure Connections. Then `isPaired`, and for the authenticated ones the
    /// read that needs authentication succeeds with no second pairing; `pair()` again is success
    /// (bonded already).
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: PairMethod.allCases)
    func pairOnDemand(method: PairMethod) async throws {
        let delegate: PairingRecorder? =
            switch method {
            case .justWorks: nil
            case .passkeyEntry: PairingRecorder(.keyboardOnly)
            case .numericComparison: PairingRecorder(.displayYesNo, acceptsComparison: true)
            }
        try await PairingJudgeLink.run(["--io", method.bumbleIO], delegate: delegate) { link in
            #expect(!link.peripheral.isPaired)
            let peripheral = link.peripheral
            let pairing = Task { () -> BluetoothError? in
                do throws(BluetoothError) {
                    try await peripheral.pair()
                    return nil
                } catch { return error }
            }
            if method == .passkeyEntry, let delegate {
                let shown = try await link.peer.waitForEvents("passkey", timeout: .seconds(60))
                try await pollUntil("our delegate is asked", timeout: .seconds(30), diagnostics: link.diagnostics) {
                    delegate.requests.contains("passkey?")
                }
                delegate.typePasskey(UInt32(try #require(shown.first?["number"] as? Int)))
            }
            if let error = await pairing.value {
                Issue.record("pair() failed: \(error)\n\(link.diagnostics())")
                return
            }
            #expect(link.peripheral.isPaired)
            let paired = try await link.peer.waitForEvents("paired", timeout: .seconds(10))
            #expect(paired.count == 1, "\(link.diagnostics())")
            #expect(paired.first?["authenticated"] as? Bool == (method != .justWorks), "\(link.diagnostics())")
            #expect(link.peer.events("pairingFailed").isEmpty)
            switch method {
            case .justWorks: #expect(delegate == nil)
            case .passkeyEntry: #expect(delegate?.requests == ["passkey?"])
            case .numericComparison:
                let compared = try #require(link.peer.events("compare").first?["number"] as? Int)
                #expect(delegate?.requests == ["confirm \(compared)"], "\(String(describing: delegate?.requests))")
            }
            if method != .justWorks {
                link.readSecret()
                let read = try await link.readOutcome()
                try link.expectAuthenticatedRead(read)
            }
            try await link.peripheral.pair()
            #expect(link.peer.events("paired").count == 1, "bonded already: nothing over the air")
        }
    }

    /// `setTrusted(_:)` is bluetoothd's `Device1.Trusted`, as another program (busctl) reads it.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 3))
    func setTrustedIsWhatBluetoothdHolds() async throws {
        try await PairingJudgeLink.run(["--io", "no-input-no-output"], delegate: nil) { link in
            let adapter = try #require(BumblePeer.adapters.first)
            let address = try #require(link.peripheral.address)
            #expect(!link.peripheral.isTrusted)
            #expect(try await Self.trusted(address, on: adapter) == false)
            try await link.peripheral.setTrusted(true)
            #expect(link.peripheral.isTrusted)
            #expect(try await Self.trusted(address, on: adapter) == true)
            try await link.peripheral.setTrusted(false)
            #expect(!link.peripheral.isTrusted)
            #expect(try await Self.trusted(address, on: adapter) == false)
        }
    }

    /// `Device1.Trusted` as busctl reads it; nil when there is no such device.
    static func trusted(_ address: String, on adapter: String) async throws -> Bool? {
        let path = "/org/bluez/\(adapter)/dev_" + address.replacingOccurrences(of: ":", with: "_")
        let result = try await Tool.run(
            "/usr/bin/busctl", ["get-property", "org.bluez", path, "org.bluez.Device1", "Trusted"])
        guard result.status == 0 else { return nil }
        return result.output.contains("true")  // b true
    }

    /// `connect(toAddress:type:)` of a Bumble peer this central never scanned for, and bluetoothd
    /// has no device of (every device forgotten first): `Adapter1.ConnectDevice` on the guest's
    /// bluetoothd (`-E`) connects it, `didConnect` comes, its services resolve, and
    /// `cancelPeripheralConnection` ends the link. `scannedFirst`: bluetoothd knows the device
    /// from a scan, which 5.66 (until 5.68) answers `AlreadyExists` and BlueZKit then connects
    /// with `Device1.Connect`; later releases connect it with `ConnectDevice`. Either way the
    /// scan's peripheral object is the one returned.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 3),
        arguments: [false, true])
    func connectByAddress(scannedFirst: Bool) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let peer = try BumblePeer.start("bumble_pairing_peripheral.py", ["--timeout", "150"])
        do {
            let recorder = FaultRecorder()
            let manager = CentralManager(
                delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: adapter))
            try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
            var scanned: Peripheral?
            if scannedFirst {
                manager.scanForPeripherals(withServices: [EndToEndTests.pairingJudgeService])
                try await waitUntil("scanning") { manager.isScanning }
                scanned = try await recorder.found(peer, scanningWith: manager)
            } else {
                #expect(manager.retrieveKnownPeripherals().isEmpty)
            }
            let peripheral = try await manager.connect(toAddress: "F1:B0:00:00:0E:01", type: .random)
            #expect(peripheral.state == .connected)
            #expect(peripheral.address == "F1:B0:00:00:0E:01")
            if let scanned { #expect(peripheral === scanned) }
            try await waitUntil("didConnect", timeout: .seconds(10)) { recorder.count("connected") == 1 }
            let services = try await peripheral.discoverServices(matching: [EndToEndTests.pairingJudgeService])
            #expect(services.map(\.uuid) == [EndToEndTests.pairingJudgeService], "\(peer.diagnostics())")
            try await manager.disconnect(from: peripheral)
            #expect(peripheral.state == .disconnected)
        } catch {
            _ = try? await peer.stop()
            try? await ExamplePeripheral.forgetKnownDevices()
            throw error
        }
        _ = try? await peer.stop()
        try await ExamplePeripheral.forgetKnownDevices()
    }

    /// bluetoothd restarted without `-E` has no `ConnectDevice` (gdbus registers experimental
    /// methods only with the flag): `connect(toAddress:type:)` throws `experimentalAPIUnavailable`
    /// naming the flag. bluetoothd is started again with its own command line after.
    @Test(.loadScaledTimeLimit(minutes: 3)) func withoutExperimentalConnectByAddressNamesTheFlag() async throws {
        let original = try #require(Bluetoothd.commandLine(), "bluetoothd is running")
        let plain = original.filter { $0 != "-E" && $0 != "--experimental" }
        #expect(plain.count < original.count, "the guest runs bluetoothd with -E: \(original)")
        try await Bluetoothd.restart(with: plain)
        do {
            try await Bluetoothd.waitUntilAdaptersPowered()
            let recorder = FaultRecorder()
            let central = CentralManager(
                delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: "hci0"))
            try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
            do {
                _ = try await central.connect(toAddress: "F1:B0:00:00:0E:77", type: .random)
                Issue.record("ConnectDevice answered on a bluetoothd without -E")
            } catch let error as BluetoothError {
                #expect(error.code == .experimentalAPIUnavailable, "\(error)")
                #expect(error.message.contains("--experimental"), "\(error.message)")
            }
        } catch {
            try? await Bluetoothd.restart(with: original)
            throw error
        }
        try await Bluetoothd.restart(with: original)
        try await Bluetoothd.waitUntilAdaptersPowered()
    }
}
