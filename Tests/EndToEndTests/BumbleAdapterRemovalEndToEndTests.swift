import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// README row "Removing the central's adapter": the Bumble-backed adapter's controller
/// (`Scripts/guest/bumble-link.py` on /dev/vhci) is unplugged and plugged back, as a USB adapter
/// pulled out and put in again, under our central connected to a Bumble peripheral
/// (`Scripts/guest/bumble_returning_peripheral.py`). btvirt's controllers cannot do this: they go
/// only with btvirt, which every later test needs; bumble-link closes and reopens its /dev/vhci
/// alone (SIGUSR1, SIGUSR2), and the test plugs it back even when it fails, so later tests
/// find the Bumble adapter. In the serialized end-to-end suite.
extension EndToEndTests {
    /// Our central is connected when its adapter goes: the app hears
    /// `didDisconnectPeripheral` with an error (the link was lost), then the state
    /// ``ManagerState/unsupported`` (the chosen adapter does not exist), in that order, so a
    /// delegate that connects again at once (the door-lock pattern) is still allowed to; that
    /// request stays pending while the adapter is missing. The peripheral sees its link end with
    /// a supervision timeout (0x08). When the adapter comes back (the same address, so the same
    /// peripheral identifier), the state returns to ``ManagerState/poweredOn`` and the pending
    /// request completes with `didConnect` once the peripheral advertises again: the same
    /// promise as for an adapter power cycle (`aRequestMadeAsTheCentralsAdapterPowersOffCompletesWhenItIsBack`).
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 5))
    func removingTheCentralsAdapterEndsTheLinkAndItsReturnCompletesTheRequest() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let recorder = AdapterRemovalRecorder()
        let manager = CentralManager(
            delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(adapter: adapter))
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        manager.scanForPeripherals(withServices: [Self.faultyService])
        try await waitUntil("scanning") { manager.isScanning }
        let peer = try BumblePeer.start("bumble_returning_peripheral.py", ["--connections", "2", "--timeout", "280"])
        let diagnostics = { "app: \(recorder.events)\n\(peer.diagnostics())" }
        try await peer.waitForEvents("advertising", timeout: .seconds(90))
        try await pollUntil("found the peer", timeout: .seconds(60), diagnostics: diagnostics) {
            recorder.discovered != nil
        }
        manager.stopScan()
        let peripheral = try #require(recorder.discovered)
        let identifier = peripheral.identifier
        recorder.reconnects(true)
        manager.connect(peripheral)
        try await pollUntil("connected", timeout: .seconds(60), diagnostics: diagnostics) {
            recorder.count("connected") == 1
        }
        // A link at rest: bluetoothd's own discovery done (5.82 exited when the adapter went away
        // while its MTU exchange of a link just made was in flight; not the subject here).
        peripheral.delegate = recorder
        peripheral.discoverServices([Self.faultyService])
        try await pollUntil("services", timeout: .seconds(30), diagnostics: diagnostics) {
            recorder.count("services") == 1
        }
        defer {
            recorder.reconnects(false)
            manager.cancelPeripheralConnection(peripheral)
            // Later tests need the adapter: back in any case (a no-op when it is there).
            BumbleLinkControl.plugBack()
        }

        try BumbleLinkControl.unplug()
        try await pollUntil("the link reported lost", timeout: .seconds(30), diagnostics: diagnostics) {
            recorder.count("disconnected") == 1
        }
        // The delegate's call, not only `state`: the manager's state changes before the call
        // reaches the delegate queue (5.87 under load once read the events in between).
        try await pollUntil("the state leaves poweredOn", timeout: .seconds(30), diagnostics: diagnostics) {
            manager.state == .unsupported && recorder.count("state unsupported") == 1
        }
        #expect(!BumbleLinkControl.isPresent(adapter), "the kernel removed \(adapter)")
        let lost = try #require(recorder.first("disconnected"))
        #expect(lost.error is BluetoothError, "the link was lost, with an error: \(String(describing: lost.error))")
        let events = recorder.events.map(\.name)
        #expect(
            events.firstIndex(of: "disconnected")! < events.firstIndex(of: "state unsupported") ?? -1,
            "the lost link before the state: \(events)")
        #expect(peripheral.state == .connecting, "the delegate's new request is pending: \(events)")
        let ended = try await peer.waitForEvents("disconnected", timeout: .seconds(30))
        #expect(ended.first?["reason"] as? Int == 0x08, "the peripheral's supervision timeout")

        try BumbleLinkControl.replug()
        try await pollUntil("powered on again", timeout: .seconds(60), diagnostics: diagnostics) {
            manager.state == .poweredOn
        }
        #expect(BumbleLinkControl.isPresent(adapter), "the same index again")
        try await pollUntil("the pending request completes", timeout: .seconds(90), diagnostics: diagnostics) {
            recorder.count("connected") == 2
        }
        #expect(peripheral.state == .connected)
        #expect(peripheral.identifier == identifier)
        #expect(recorder.count("failedToConnect") == 0, "\(recorder.events)")
        #expect(recorder.events.last { $0.name.hasPrefix("state") }?.name == "state poweredOn")
        let connections = try await peer.waitForEvents("connected", count: 2, timeout: .seconds(30))
        #expect(connections.count == 2)

        recorder.reconnects(false)
        manager.cancelPeripheralConnection(peripheral)
        try await pollUntil("cancelled", timeout: .seconds(30), diagnostics: diagnostics) {
            recorder.count("disconnected") == 2
        }
        #expect(recorder.events.last?.name == "disconnected" && recorder.events.last?.error == nil)
        // Stopped, not waited for: a link that the kernel ends as the central may never reach the
        // Bumble controller (see `ourBridgesCentralAgainstABumbleUARTEchoServer`).
        _ = try await peer.stop()
        #expect(peer.events("error").isEmpty, "\(peer.diagnostics())")
    }
}

/// The Bumble-backed adapter's controller, unplugged and plugged back through its bumble-link
/// process (SIGUSR1, SIGUSR2; its pid is in `<socket>.pid`, the socket in
/// `BLUEZKIT_BUMBLE_SOCKETS`).
enum BumbleLinkControl {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The first bumble-link's process id.
    static func pid() throws -> pid_t {
        let sockets = ProcessInfo.processInfo.environment["BLUEZKIT_BUMBLE_SOCKETS"] ?? ""
        guard let socket = sockets.split(separator: " ").first else { throw Failure(description: "no Bumble socket") }
        let text = try String(contentsOfFile: "\(socket).pid", encoding: .utf8)
        guard let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 1 else {
            throw Failure(description: "no pid in \(socket).pid: \(text)")
        }
        return pid
    }

    private static func send(_ signal: Int32) throws {
        let pid = try pid()
        guard kill(pid, signal) == 0 else { throw Failure(description: "kill \(pid): errno \(errno)") }
    }

    /// Unplugs the controller: the kernel unregisters the adapter.
    static func unplug() throws { try send(SIGUSR1) }

    /// Plugs the controller back.
    static func replug() throws { try send(SIGUSR2) }

    /// Plugs the controller back, ignoring failures (for a `defer`).
    static func plugBack() { try? replug() }

    /// Whether the kernel has `adapter` (`hciN`).
    static func isPresent(_ adapter: String) -> Bool {
        FileManager.default.fileExists(atPath: "/sys/class/bluetooth/\(adapter)")
    }
}

/// The central's and the peripheral's delegate: every callback in order; while `reconnects` is on, connects again
/// from `didDisconnectPeripheral` (the door-lock pattern).
final class AdapterRemovalRecorder: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.adapter-removal")
    struct Event: @unchecked Sendable {
        let name: String
        let error: (any Error)?
    }
    private let state = Mutex<(discovered: Peripheral?, events: [Event], reconnects: Bool)>((nil, [], false))
    var discovered: Peripheral? { state.withLock { $0.discovered } }
    var events: [Event] { state.withLock { $0.events } }
    func count(_ name: String) -> Int { events.filter { $0.name == name }.count }
    func first(_ name: String) -> Event? { events.first { $0.name == name } }
    func reconnects(_ on: Bool) { state.withLock { $0.reconnects = on } }
    private func record(_ name: String, _ error: (any Error)? = nil) {
        state.withLock { $0.events.append(Event(name: name, error: error)) }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) { record("state \(central.state)") }
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        state.withLock { $0.discovered = $0.discovered ?? peripheral }
    }
    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) { record("connected") }
    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        record("failedToConnect", error)
    }
    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        record("disconnected", error)
        if state.withLock({ $0.reconnects }) { central.connect(peripheral) }
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) { record("services", error) }
}
