import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// README row "Passkey and numeric-comparison pairing flows and their refusal defaults": our
/// central's pairing agent against the real bluetoothd and kernel SMP, with Google Bumble's SMP
/// as the peer and the judge (`Scripts/guest/bumble_pairing_peripheral.py`). btvirt cannot do
/// this: its controllers pair just works only, with no IO capability of a peer to choose, and
/// nothing but BlueZ on both ends. Bumble's peripheral answers a read only on a link whose keys
/// came from an authenticated pairing, and reports the passkey it shows, the number it compares,
/// and how its SMP ended.
///
/// bluetoothd asks its *default* agent about a pairing that no `Device1.Pair` call started, as
/// here, where the read's Insufficient Authentication makes the kernel pair (`Peripheral.pair()`,
/// tested in `BumblePairOnDemandEndToEndTests.swift`, is the exception), so a manager's delegate
/// is asked only when its app made the agent the default
/// (``CentralManagerOptions/requestsDefaultPairingAgent``): every test here asks.
/// In the serialized end-to-end suite.
extension EndToEndTests {
    static let pairingJudgeService = BluetoothUUID(string: "5A1E0E01-B1E2-4C00-9E00-000000000035")
    static let pairingJudgeSecret = BluetoothUUID(string: "5A1E0E02-B1E2-4C00-9E00-000000000035")

    /// Passkey entry (our `KeyboardOnly` against Bumble's `DisplayOnly`): Bumble shows a
    /// passkey, our delegate is asked for it once, about the peripheral being read, and answers
    /// what Bumble showed: the read succeeds and Bumble's keys are authenticated (LE Secure
    /// Connections). Typing a wrong passkey fails the pairing for both (SMP Confirm Value Failed,
    /// 0x04) and the read (``PairingJudgeLink/expectRefused(_:reason:)``).
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func passkeyEntryWithThePasskeyBumbleShows(typedRight: Bool) async throws {
        let delegate = PairingRecorder(.keyboardOnly)
        try await PairingJudgeLink.run(["--io", "display-only"], delegate: delegate) { link in
            link.readSecret()
            let shown = try await link.peer.waitForEvents("passkey", timeout: .seconds(60))
            try await pollUntil(
                "our delegate is asked for the passkey", timeout: .seconds(30), diagnostics: link.diagnostics
            ) {
                delegate.requests.contains("passkey?")
            }
            let passkey = try #require(shown.first?["number"] as? Int)
            #expect(
                delegate.peers.allSatisfy {
                    $0.identifier == link.peripheral.identifier && $0.peripheral === link.peripheral
                })
            delegate.typePasskey(UInt32(typedRight ? passkey : (passkey + 1) % 1_000_000))
            let read = try await link.readOutcome()
            #expect(delegate.requests == ["passkey?"], "\(delegate.requests)")
            if typedRight {
                try link.expectAuthenticatedRead(read)
            } else {
                try await link.expectRefused(read, reason: 0x04)
            }
        }
    }

    /// Numeric comparison (both `DisplayYesNo`, LE Secure Connections): our delegate's
    /// confirmation carries the six-digit number Bumble shows. Accepting it pairs (Bumble's keys
    /// authenticated) and the read succeeds; refusing it fails the pairing (SMP Numeric
    /// Comparison Failed, 0x0C, as Bumble hears it) and the read, as when a Core Bluetooth user
    /// cancels the system's pairing alert.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func numericComparisonWithTheNumberBumbleShows(accepts: Bool) async throws {
        let delegate = PairingRecorder(.displayYesNo, acceptsComparison: accepts)
        try await PairingJudgeLink.run(["--io", "display-yes-no"], delegate: delegate) { link in
            link.readSecret()
            let read = try await link.readOutcome()
            let compared = try #require(link.peer.events("compare").first?["number"] as? Int, "\(link.diagnostics())")
            #expect(delegate.requests == ["confirm \(compared)"], "\(delegate.requests)")
            #expect((0..<1_000_000).contains(compared))
            #expect(delegate.peers.map(\.identifier) == [link.peripheral.identifier])
            if accepts {
                try link.expectAuthenticatedRead(read)
            } else {
                try await link.expectRefused(read, reason: 0x0C)
            }
        }
    }

    /// The refusal defaults, on the real bluetoothd. A delegate that answers nothing (its
    /// protocol's defaults) refuses the numeric comparison its `DisplayYesNo` brings: Bumble's
    /// pairing fails (0x0C) and the read fails. With no delegate the agent is
    /// `NoInputNoOutput`: nothing is asked, the pairing can only be just works, which Bumble's
    /// SMP reports as unauthenticated keys, so the read that needs more fails: nothing is
    /// silently authenticated. How it fails depends on bluetoothd: 5.82 and later retry the
    /// read once and pass on the peripheral's `insufficientAuthentication`; 5.66 raises the
    /// security again, to MITM, and the kernel refuses that pairing (SMP 0x03).
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .asksForDefaultAgent,
        .loadScaledTimeLimit(minutes: 4), arguments: [true, false])
    func withoutAnAnswerAnAuthenticatedPairingIsRefused(hasDelegate: Bool) async throws {
        let idle = IdlePairingDelegate()
        try await PairingJudgeLink.run(["--io", "display-yes-no"], delegate: hasDelegate ? idle : nil) { link in
            link.readSecret()
            let read = try await link.readOutcome()
            #expect(link.peer.events("read").allSatisfy { $0["authenticated"] as? Bool == false })
            #expect(link.peer.events("passkey").isEmpty)
            if hasDelegate {
                #expect(link.peer.events("compare").count == 1, "\(link.diagnostics())")
                try await link.expectRefused(read, reason: 0x0C)
            } else if emulatedBlueZ(atLeast: "5.82") && !link.bluetoothdLostTheSecurityRetry() {
                // Just works succeeded and bluetoothd retries a read once: the peripheral's own
                // answer reaches the app, as Core Bluetooth's `CBATTError.insufficientAuthentication`.
                let error = try #require(read.error as? ATTError, "\(read.name) \(String(describing: read.error))")
                #expect(error.code == .insufficientAuthentication, "\(error)")
                #expect(link.peer.events("pairingFailed").isEmpty)
            } else if emulatedBlueZ(atLeast: "5.82") {
                // bluetoothd failed its retry during the pairing (ATT 0x0E) and BlueZKit read
                // again: bluetoothd raises that new read's security to MITM, which the kernel
                // refuses for a NoInputNoOutput agent, as on 5.66 below. Still no value.
                #expect(read.error != nil, "\(read.name)")
                #expect(link.secret.value == nil)
            } else {
                // bluetoothd 5.66 raises the security a second time, to MITM, which the kernel
                // refuses for a NoInputNoOutput agent (SMP Authentication Requirements, 0x03),
                // and the read is never answered (see ``PairingJudgeLink/expectRefused(_:reason:)``).
                let error = try #require(read.error, "\(read.name)")
                withKnownIssue("a failed pairing reaches the app as 0x0E or a D-Bus timeout", isIntermittent: true) {
                    #expect((error as? BluetoothError)?.code == .pairingFailed, "\(error)")
                }
                // Bumble's SMP logs that failure, but emits no `pairing_failure` for it: its
                // session of the first pairing had completed.
                try await pollUntil(
                    "Bumble's SMP logs the refusal", timeout: .seconds(10), diagnostics: link.diagnostics
                ) {
                    link.peer.standardError.contains("pairing failure (AUTHENTICATION_REQUIREMENTS)")
                }
            }
            if !hasDelegate {
                #expect(link.peer.events("compare").isEmpty, "no comparison without a delegate")
                let paired = link.peer.events("paired")
                #expect(paired.count == 1, "bluetoothd paired just works: \(link.diagnostics())")
                #expect(paired.allSatisfy { $0["authenticated"] as? Bool == false })
            }
        }
    }
}

/// Our central on the Bumble-backed adapter, its agent bluetoothd's default, connected to
/// `bumble_pairing_peripheral.py`, with no bonds before or after.
struct PairingJudgeLink {
    let manager: CentralManager
    let recorder: FaultRecorder
    let peripheral: Peripheral
    let peer: ExampleProgram
    let secret: Characteristic
    /// Where bluetoothd's log stood before the link was made.
    let logStart: UInt64

    /// Forgets every device, makes the link, runs `body`, ends the link and forgets every
    /// device again (on every path: a bond left behind would encrypt a later test's link).
    static func run(
        _ arguments: [String], delegate: (any PairingAgentDelegate)?, _ body: (PairingJudgeLink) async throws -> Void
    ) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        var peer: ExampleProgram?
        do {
            let link = try await connect(arguments, delegate: delegate, started: { peer = $0 })
            try await body(link)
            link.manager.cancelPeripheralConnection(link.peripheral)
            try await pollUntil("disconnected", timeout: .seconds(30), diagnostics: link.diagnostics) {
                link.peripheral.state == .disconnected
            }
            // Bumble's host does not always hear the end of an encrypted link over the LocalLink
            // (5.82: bluetoothd logged it, Bumble printed nothing): its run is not waited for.
            _ = try? await link.peer.stop()
            #expect(link.peer.events("error").isEmpty, "\(link.diagnostics())")
            withExtendedLifetime(delegate) {}
        } catch {
            _ = try? await peer?.stop()
            try? await ExamplePeripheral.forgetKnownDevices()
            throw error
        }
        try await ExamplePeripheral.forgetKnownDevices()
    }

    private static func connect(
        _ arguments: [String], delegate: (any PairingAgentDelegate)?, started: (ExampleProgram) -> Void
    ) async throws -> PairingJudgeLink {
        let adapter = try #require(BumblePeer.adapters.first)
        let logStart = EndToEndScope.logSize()
        let recorder = FaultRecorder()
        let manager = CentralManager(
            delegate: recorder, queue: recorder.queue,
            options: CentralManagerOptions(adapter: adapter, requestsDefaultPairingAgent: true))
        manager.pairingAgentDelegate = delegate
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        // The kernel pairs with the IO capability of bluetoothd's default agent: ours, with the
        // delegate's capability, before the link comes up.
        try await DefaultAgentCheck.waitUntilDefault(manager.pairingAgent, since: logStart, delegate: delegate)
        manager.scanForPeripherals(withServices: [EndToEndTests.pairingJudgeService])
        try await waitUntil("scanning") { manager.isScanning }
        let peer = try BumblePeer.start("bumble_pairing_peripheral.py", arguments + ["--timeout", "200"])
        started(peer)
        let peripheral = try await recorder.found(peer, scanningWith: manager)
        manager.connect(peripheral)
        try await pollUntil("connected", timeout: .seconds(60), diagnostics: peer.diagnostics) {
            peripheral.state == .connected
        }
        peripheral.discoverServices([EndToEndTests.pairingJudgeService])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let service = try #require(peripheral.services?.first { $0.uuid == EndToEndTests.pairingJudgeService })
        peripheral.discoverCharacteristics([EndToEndTests.pairingJudgeSecret], for: service)
        try await waitUntil("characteristics", timeout: .seconds(30)) { recorder.count("characteristics") == 1 }
        let secret = try #require(service.characteristics?.first { $0.uuid == EndToEndTests.pairingJudgeSecret })
        #expect(peer.events("paired").isEmpty && peer.events("pairingFailed").isEmpty, "no pairing before the read")
        return PairingJudgeLink(
            manager: manager, recorder: recorder, peripheral: peripheral, peer: peer, secret: secret, logStart: logStart
        )
    }

    /// Reads the characteristic that needs an authenticated link.
    func readSecret() { peripheral.readValue(for: secret) }

    /// The read's `didUpdateValueFor`, once it came (the pairing in between).
    func readOutcome() async throws -> FaultRecorder.Event {
        try await pollUntil("the read's outcome", timeout: .seconds(90), diagnostics: diagnostics) {
            recorder.count("value \(EndToEndTests.pairingJudgeSecret)") == 1
        }
        return try #require(recorder.first("value \(EndToEndTests.pairingJudgeSecret)"))
    }

    /// The read succeeded with Bumble's value, after a pairing Bumble's SMP calls authenticated.
    func expectAuthenticatedRead(_ read: FaultRecorder.Event) throws {
        #expect(read.error == nil, "\(String(describing: read.error)) \(diagnostics())")
        #expect(secret.value == Data([0x4D]))
        let paired = peer.events("paired")
        #expect(paired.count == 1, "\(diagnostics())")
        #expect(paired.first?["authenticated"] as? Bool == true && paired.first?["sc"] as? Bool == true)
        #expect(peer.events("pairingFailed").isEmpty)
        #expect(peer.events("read").last?["authenticated"] as? Bool == true)
    }

    /// The read failed, with no value, and Bumble's SMP reports the pairing failed with `reason`.
    ///
    /// The read's error should be ``BluetoothError/Code/pairingFailed`` (the Core Bluetooth
    /// differences article, *Pairing agents*; Core Bluetooth fails the read too). bluetoothd
    /// 5.82 and 5.87 get there in ways BlueZKit does not report as `pairingFailed` (seen
    /// 2026-12-06 and 07): (a) bluetoothd writes its retried read into the ATT socket the kernel
    /// holds for the pairing and fails it at once with ATT 0x0E (a race under load, see
    /// `CentralEngine+ReadRetry.swift`); BlueZKit reads again, and that read fails as (b) or with
    /// the link's end (`peripheralDisconnected`: after a wrong passkey the kernel ended the link
    /// with reason Unknown, which is not known to be a failed pairing); (b) after a refusal by
    /// our own agent the link stays up and bluetoothd never answers the `ReadValue`, which ends
    /// when the D-Bus call times out (25 s) as ``BluetoothError/Code/connectionTimeout``. Nor
    /// does bluetoothd always end the link after a failed pairing (it did after a wrong
    /// passkey, not after a refused comparison), so that is not asserted.
    func expectRefused(_ read: FaultRecorder.Event, reason: Int) async throws {
        let error = try #require(read.error, "\(read.name)")
        withKnownIssue("a failed pairing reaches the app as a timeout or the link's end", isIntermittent: true) {
            #expect((error as? BluetoothError)?.code == .pairingFailed, "\(error)")
        }
        #expect(secret.value == nil)
        let failed = try await peer.waitForEvents("pairingFailed", timeout: .seconds(10))
        #expect(failed.first?["reason"] as? Int == reason, "\(diagnostics())")
        #expect(peer.events("paired").isEmpty)
        #expect(peer.events("read").allSatisfy { $0["authenticated"] as? Bool == false })
    }

    /// Whether bluetoothd failed its retried read during the pairing the read started: it wrote
    /// the read into the ATT socket the kernel held for the pairing (`src/shared/att.c`
    /// `bt_att_chan_write`), and BlueZKit read again (`CentralEngine+ReadRetry.swift`).
    func bluetoothdLostTheSecurityRetry() -> Bool {
        EndToEndScope.log(since: logStart).contains("write failed: Transport endpoint is not connected")
    }

    func diagnostics() -> String { "app: \(recorder.events.map(\.name))\n\(peer.diagnostics())" }
}

/// A pairing delegate that records what bluetoothd asked, answers comparisons and
/// authorizations as told, and holds a passkey request until the test types the passkey.
final class PairingRecorder: PairingAgentDelegate, @unchecked Sendable {
    let ioCapability: IOCapability
    let acceptsComparison: Bool
    let acceptsAuthorization: Bool
    private struct State {
        var requests: [String] = []
        var peers: [PairingPeer] = []
        var typing: (@Sendable (UInt32?) -> Void)?
    }
    private let state = Mutex(State())
    var requests: [String] { state.withLock { $0.requests } }
    var peers: [PairingPeer] { state.withLock { $0.peers } }

    init(_ ioCapability: IOCapability, acceptsComparison: Bool = false, acceptsAuthorization: Bool = false) {
        self.ioCapability = ioCapability
        self.acceptsComparison = acceptsComparison
        self.acceptsAuthorization = acceptsAuthorization
    }

    private func record(_ request: String, _ peer: PairingPeer?) {
        state.withLock { state in
            state.requests.append(request)
            if let peer { state.peers.append(peer) }
        }
    }

    /// Answers the open passkey request with `passkey`.
    func typePasskey(_ passkey: UInt32) {
        state.withLock { $0.typing.take() }?(passkey)
    }

    func pairingAgent(_ agent: PairingAgent, displayPasskey passkey: UInt32, entered: Int, for peer: PairingPeer) {
        record("display \(passkey)", peer)
    }
    func pairingAgent(
        _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
        completion: @escaping @Sendable (Bool) -> Void
    ) {
        record("confirm \(passkey)", peer)
        completion(acceptsComparison)
    }
    func pairingAgent(
        _ agent: PairingAgent, requestPasskeyFor peer: PairingPeer, completion: @escaping @Sendable (UInt32?) -> Void
    ) {
        state.withLock { $0.typing = completion }
        record("passkey?", peer)
    }
    func pairingAgent(
        _ agent: PairingAgent, authorizePairingWith peer: PairingPeer, completion: @escaping @Sendable (Bool) -> Void
    ) {
        record("authorize", peer)
        completion(acceptsAuthorization)
    }
    func pairingAgentDidCancelRequest(_ agent: PairingAgent) { record("cancel", nil) }
}
