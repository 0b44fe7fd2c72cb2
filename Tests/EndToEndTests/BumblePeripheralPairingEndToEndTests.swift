import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// README row "The same with our *peripheral* being paired (by a Bumble central)": our
/// peripheral manager's pairing agent, as bluetoothd's default agent, against the real
/// bluetoothd and kernel SMP, with Google Bumble's SMP as the central and the judge
/// (`Scripts/guest/bumble_pairing_central.py`). btvirt cannot do this: its controllers pair just
/// works only, with no IO capability of a peer to choose, and nothing but BlueZ on both ends.
///
/// Our characteristic has ``AttributePermissions/readEncryptionRequired`` (BlueZ flag
/// `encrypt-read`); Bumble reads it unpaired (bluetoothd answers Insufficient Encryption, 0x0F),
/// pairs as the initiator (LE Secure Connections, bonding, MITM unless told), and reads again.
/// The kernel, the responder, picks the method from both IO capabilities and the MITM bits;
/// bluetoothd asks its default agent, ours. What bluetoothd called, seen on 5.66, 5.82 and
/// 5.87 (2026-12-06), with Bumble asking for MITM:
/// - Bumble `DisplayOnly`, ours `KeyboardOnly`: `RequestPasskey` (our delegate types what
///   Bumble shows);
/// - Bumble `KeyboardOnly`, ours `DisplayOnly`: `DisplayPasskey` (Bumble types what our delegate
///   shows), once;
/// - both `DisplayYesNo`: `RequestConfirmation` with Bumble's six-digit number;
/// - ours `NoInputNoOutput` (no delegate): no delegate to ask; just works, unauthenticated
///   (whatever bluetoothd asks the agent, its built-in answers accept just works);
/// - Bumble without MITM, ours `DisplayYesNo`: `RequestAuthorization` (just works, confirmed).
///
/// `encrypt-read` needs encryption, not authentication: a just-works pairing unlocks it too
/// (the last test), as only our agent's refusal can prevent.
/// In the serialized end-to-end suite.
extension EndToEndTests {
    static let peripheralPairingService = BluetoothUUID(string: "5A1E0E11-B1E2-4C00-9E00-000000000035")
    static let peripheralPairingSecret = BluetoothUUID(string: "5A1E0E12-B1E2-4C00-9E00-000000000035")

    /// Passkey entry both ways, MITM: our `KeyboardOnly` delegate is asked once for the passkey
    /// Bumble (`DisplayOnly`) shows and types it; our `DisplayOnly` delegate is shown a passkey
    /// once, which Bumble (`KeyboardOnly`) types. Bumble's keys are authenticated and its read
    /// gets what our peripheral served.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func aBumbleCentralPairsByPasskey(weType: Bool) async throws {
        let delegate = PairingRecorder(weType ? .keyboardOnly : .displayOnly)
        let passkeyFile = FileManager.default.temporaryDirectory.appendingPathComponent("bzk-passkey-\(UUID())")
        defer { try? FileManager.default.removeItem(at: passkeyFile) }
        let arguments =
            weType ? ["--io", "display-only"] : ["--io", "keyboard-only", "--passkey-file", passkeyFile.path]
        try await PeripheralPairingLink.run(arguments, delegate: delegate) { link in
            if weType {
                let shown = try await link.peer.waitForEvents("passkey", timeout: .seconds(60))
                try await pollUntil("our delegate is asked", timeout: .seconds(30), diagnostics: link.diagnostics) {
                    delegate.requests == ["passkey?"]
                }
                let passkey = try #require(shown.first?["number"] as? Int)
                delegate.typePasskey(UInt32(passkey))
            } else {
                try await pollUntil("our delegate shows", timeout: .seconds(60), diagnostics: link.diagnostics) {
                    !delegate.requests.isEmpty
                }
                let shown = try #require(delegate.requests.first?.split(separator: " ").last.flatMap { Int($0) })
                #expect(delegate.requests == ["display \(shown)"], "\(delegate.requests)")
                try "\(shown)".write(to: passkeyFile, atomically: true, encoding: .ascii)
                let entered = try await link.peer.waitForEvents("passkeyEntered", timeout: .seconds(30))
                #expect(entered.first?["number"] as? Int == shown)
            }
            try await link.expectAuthenticatedRead()
            #expect(delegate.requests.count == 1, "\(delegate.requests)")
            #expect(delegate.peers.map(\.address) == [link.bumbleAddress])
        }
    }

    /// Numeric comparison (both `DisplayYesNo`, LE Secure Connections): our delegate is asked
    /// once to confirm exactly the number Bumble shows. Accepting pairs and Bumble reads our
    /// value; refusing fails Bumble's pairing (SMP Numeric Comparison Failed, 0x0C) and its read
    /// gets no value, and no read reaches our peripheral.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func aBumbleCentralPairsByNumericComparison(accepts: Bool) async throws {
        let delegate = PairingRecorder(.displayYesNo, acceptsComparison: accepts)
        try await PeripheralPairingLink.run(["--io", "display-yes-no"], delegate: delegate) { link in
            try await link.waitForTheRead()
            let compared = try #require(link.peer.events("compare").first?["number"] as? Int, "\(link.diagnostics())")
            #expect(delegate.requests == ["confirm \(compared)"], "\(delegate.requests)")
            #expect(delegate.peers.map(\.address) == [link.bumbleAddress])
            if accepts {
                try await link.expectAuthenticatedRead()
            } else {
                try await link.expectRefused(reason: 0x0C)
            }
        }
    }

    /// The defaults in the peripheral role. A delegate that answers nothing (its protocol's
    /// defaults, `DisplayYesNo`) refuses the numeric comparison: Bumble's pairing fails (0x0C)
    /// and it reads nothing. With no delegate our agent is `NoInputNoOutput` and accepts just
    /// works by itself: the kernel does not refuse the MITM Bumble asks for, it pairs just works
    /// (`smp_cmd_pairing_req` lowers the level for a `NoInputNoOutput` host), Bumble's keys are
    /// unauthenticated, and `encrypt-read` lets Bumble read: no authenticated pairing is ever
    /// made without a delegate, but an encrypted characteristic is open to any central that
    /// pairs just works.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func withoutAnAnswerOurPeripheralMakesNoAuthenticatedPairing(hasDelegate: Bool) async throws {
        let idle = IdlePairingDelegate()
        try await PeripheralPairingLink.run(["--io", "display-yes-no"], delegate: hasDelegate ? idle : nil) { link in
            try await link.waitForTheRead()
            #expect(link.peer.events("compare").count == (hasDelegate ? 1 : 0), "\(link.diagnostics())")
            if hasDelegate {
                try await link.expectRefused(reason: 0x0C)
            } else {
                try await link.expectRead(authenticated: false)
            }
        }
    }

    /// Just works, when Bumble asks for no MITM: bluetoothd asks our `DisplayYesNo` delegate to
    /// authorize the pairing, once. Authorizing pairs (unauthenticated keys, which
    /// `encrypt-read` accepts) and Bumble reads our value; refusing fails Bumble's pairing
    /// (SMP Numeric Comparison Failed, 0x0C: the kernel answers every refused confirmation of
    /// a Secure Connections pairing so) and Bumble reads nothing.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func aJustWorksPairingIsAuthorizedByOurDelegate(authorizes: Bool) async throws {
        let delegate = PairingRecorder(.displayYesNo, acceptsAuthorization: authorizes)
        try await PeripheralPairingLink.run(["--io", "display-yes-no", "--no-mitm"], delegate: delegate) { link in
            try await link.waitForTheRead()
            #expect(delegate.requests == ["authorize"], "\(delegate.requests)")
            #expect(link.peer.events("compare").isEmpty)
            if authorizes {
                try await link.expectRead(authenticated: false)
            } else {
                try await link.expectRefused(reason: 0x0C)
            }
        }
    }
}

/// Our peripheral manager on the Bumble-backed adapter, its agent bluetoothd's default,
/// publishing a characteristic that needs encryption, read by `bumble_pairing_central.py`;
/// no bonds before or after.
struct PeripheralPairingLink {
    let manager: PeripheralManager
    let server: PairingServerDelegate
    let peer: ExampleProgram
    /// The Bumble central's address.
    let bumbleAddress = "F1:B0:00:00:0E:21"

    /// Forgets every device, publishes, starts Bumble and advertises, runs `body`, waits for
    /// Bumble to end, and forgets every device again (on every path: a bond left behind would
    /// encrypt a later test's link).
    static func run(
        _ arguments: [String], delegate: (any PairingAgentDelegate)?,
        _ body: (PeripheralPairingLink) async throws -> Void
    ) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        var peer: ExampleProgram?
        do {
            let link = try await start(arguments, delegate: delegate, started: { peer = $0 })
            defer {
                link.manager.stopAdvertising()
                link.manager.removeAllServices()
            }
            try await body(link)
            try await pollUntil("Bumble ends", timeout: .seconds(60), diagnostics: link.diagnostics) {
                link.peer.status != nil
            }
            #expect(link.peer.status == 0, "\(link.diagnostics())")
            withExtendedLifetime(delegate) {}
        } catch {
            _ = try? await peer?.stop()
            try? await ExamplePeripheral.forgetKnownDevices()
            throw error
        }
        try await ExamplePeripheral.forgetKnownDevices()
    }

    private static func start(
        _ arguments: [String], delegate: (any PairingAgentDelegate)?, started: (ExampleProgram) -> Void
    ) async throws -> PeripheralPairingLink {
        let adapter = try #require(BumblePeer.adapters.first)
        let logStart = EndToEndScope.logSize()
        let server = PairingServerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue,
            options: PeripheralManagerOptions(adapter: adapter, requestsDefaultPairingAgent: true))
        manager.pairingAgentDelegate = delegate
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        // The kernel pairs with the IO capability of bluetoothd's default agent: ours.
        try await DefaultAgentCheck.waitUntilDefault(manager.pairingAgent, since: logStart, delegate: delegate)
        let secret = MutableCharacteristic(
            type: EndToEndTests.peripheralPairingSecret, properties: [.read], value: nil,
            permissions: [.readEncryptionRequired])
        let service = MutableService(type: EndToEndTests.peripheralPairingService, primary: true)
        service.characteristics = [secret]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.added }
        let peer = try BumblePeer.start(
            "bumble_pairing_central.py",
            [
                "--service", "\(EndToEndTests.peripheralPairingService)",
                "--characteristic", "\(EndToEndTests.peripheralPairingSecret)", "--timeout", "200",
            ] + arguments)
        started(peer)
        try await peer.waitForEvents("scanning", timeout: .seconds(120))
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [EndToEndTests.peripheralPairingService]])
        try await waitUntil("advertising", timeout: .seconds(30)) { manager.isAdvertising }
        let before = try await peer.waitForEvents("readBeforePairing", timeout: .seconds(90))
        // bluetoothd refuses the unencrypted read itself (Insufficient Encryption): it never reaches us.
        #expect(before.first?["error"] as? Int == 0x0F, "\(peer.diagnostics())")
        #expect(server.reads.isEmpty)
        return PeripheralPairingLink(manager: manager, server: server, peer: peer)
    }

    /// Waits for Bumble's read after its pairing.
    func waitForTheRead() async throws {
        _ = try await peer.waitForEvents("read", timeout: .seconds(90))
    }

    /// Bumble paired with authenticated keys and read what our peripheral served.
    func expectAuthenticatedRead() async throws { try await expectRead(authenticated: true) }

    /// Bumble paired (LE Secure Connections, keys `authenticated` or not), and its read after the
    /// pairing got the value our peripheral served, from the one read that reached us.
    func expectRead(authenticated: Bool) async throws {
        try await waitForTheRead()
        let paired = peer.events("paired")
        #expect(paired.count == 1, "\(diagnostics())")
        #expect(paired.first?["authenticated"] as? Bool == authenticated && paired.first?["sc"] as? Bool == true)
        #expect(peer.events("pairingFailed").isEmpty)
        let read = try #require(peer.events("read").first)
        #expect(read["error"] is NSNull, "\(diagnostics())")
        #expect(read["value"] as? String == PairingServerDelegate.served.map { String(format: "%02x", $0) }.joined())
        #expect(server.reads.count == 1, "\(server.reads)")
    }

    /// Bumble's pairing failed with SMP `reason` and its read after it got no value; no read
    /// reached our peripheral.
    func expectRefused(reason: Int) async throws {
        let failed = try await peer.waitForEvents("pairingFailed", timeout: .seconds(30))
        #expect(failed.first?["reason"] as? Int == reason, "\(diagnostics())")
        #expect(peer.events("paired").isEmpty)
        try await waitForTheRead()
        let read = try #require(peer.events("read").first)
        #expect(read["value"] is NSNull && !(read["error"] is NSNull), "\(diagnostics())")
        #expect(server.reads.isEmpty, "\(server.reads)")
    }

    func diagnostics() -> String { "reads: \(server.reads)\n\(peer.diagnostics())" }
}

/// A peripheral manager delegate that answers every read with ``served`` and records who read.
final class PairingServerDelegate: PeripheralManagerDelegate, @unchecked Sendable {
    static let served = Data([0x5A, 0x35])
    let queue = DispatchQueue(label: "e2e.peripheral-pairing")
    private let state = Mutex<(added: Bool, reads: [UUID])>((false, []))
    var added: Bool { state.withLock { $0.added } }
    var reads: [UUID] { state.withLock { $0.reads } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        state.withLock { $0.added = error == nil }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        state.withLock { $0.reads.append(request.central.identifier) }
        request.value = Self.served
        peripheral.respond(to: request, withResult: .success)
    }
}

extension EndToEndTests {
    /// The judge of the simulator's rule for a central with no agent at all (`GATTTests.
    /// anEncryptedReadFailsAndDropsTheLinkWithoutAnAgent`): when a read makes the kernel pair
    /// and no agent is registered, the pairing fails. Seen on 5.82 (2026-12-06) against
    /// Bumble's `NoInputNoOutput` peripheral, LE Secure Connections: the kernel asks bluetoothd
    /// to confirm the just-works pairing ("Requesting agent authentication … No agent available
    /// for request type 2"), bluetoothd refuses, and Bumble's SMP hears Numeric Comparison
    /// Failed (0x0C). The read's own outcome depends on bluetoothd and is not asserted here.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func withoutAnyAgentASecurityPairingFails() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let recorder = FaultRecorder()
        let manager = CentralManager(
            delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: adapter))
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        #expect(!manager.pairingAgent.isRegistered)
        manager.scanForPeripherals(withServices: [Self.pairingJudgeService])
        try await waitUntil("scanning") { manager.isScanning }
        let peer = try BumblePeer.start(
            "bumble_pairing_peripheral.py", ["--io", "no-input-no-output", "--timeout", "200"])
        do {
            let peripheral = try await recorder.found(peer, scanningWith: manager)
            manager.connect(peripheral)
            try await pollUntil("connected", timeout: .seconds(60), diagnostics: peer.diagnostics) {
                peripheral.state == .connected
            }
            peripheral.discoverServices([Self.pairingJudgeService])
            try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
            let service = try #require(peripheral.services?.first { $0.uuid == Self.pairingJudgeService })
            peripheral.discoverCharacteristics([Self.pairingJudgeSecret], for: service)
            try await waitUntil("characteristics", timeout: .seconds(30)) { recorder.count("characteristics") == 1 }
            let secret = try #require(service.characteristics?.first { $0.uuid == Self.pairingJudgeSecret })
            peripheral.readValue(for: secret)
            let failed = try await peer.waitForEvents("pairingFailed", timeout: .seconds(90))
            #expect(failed.first?["reason"] as? Int == 0x0C, "\(peer.diagnostics())")
            #expect(peer.events("paired").isEmpty, "\(peer.diagnostics())")
            #expect(secret.value == nil)
            manager.cancelPeripheralConnection(peripheral)
            try await pollUntil("disconnected", timeout: .seconds(30), diagnostics: peer.diagnostics) {
                peripheral.state == .disconnected
            }
        } catch {
            _ = try? await peer.stop()
            try? await ExamplePeripheral.forgetKnownDevices()
            throw error
        }
        _ = try? await peer.stop()
        try await ExamplePeripheral.forgetKnownDevices()
    }
}
