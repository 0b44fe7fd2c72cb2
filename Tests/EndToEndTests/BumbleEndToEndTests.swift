import Foundation
import TestSupport
import Testing

/// Google's Bumble stack as the judge: its controller, host, ATT, GATT and heart-rate profile,
/// none of it BlueZ's or ours, on a Bumble controller that the guest's bluetoothd manages
/// (`bluez-vm run --bumble 1`; `Scripts/guest/bumble-link.py`). The peers are
/// `Scripts/guest/bumble_heart_rate_sensor.py` and `bumble_heart_rate_client.py`.
/// In the serialized end-to-end suite.
extension EndToEndTests {
    /// heart-rate-central on the Bumble-backed adapter against Bumble's `HeartRateService`: it
    /// finds the sensor, reads Bumble's Body Sensor Location (Wrist, 2: not the Chest our own
    /// examples use) and gets exactly the measurements Bumble sent, in order, a 16-bit rate, the
    /// energy expended and the RR interval included.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 3))
    func ourCentralAgainstBumblesHeartRateSensor() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let central = try ExampleProgram(
            "heart-rate-central", ["--json", "--adapter", adapter, "--name", "Bumble HRM", "--count", "3"],
            busAddress: nil)
        try await central.waitForEvents("scanning", timeout: .seconds(30))
        let sensor = try BumblePeer.start(
            "bumble_heart_rate_sensor.py", ["--name", "Bumble HRM", "--count", "3", "--timeout", "150"])
        // Python importing Bumble in the emulated guest takes seconds, more on a busy host.
        try await sensor.waitForEvents("advertising", timeout: .seconds(90))
        try await central.waitForEvents("connected", timeout: .seconds(60))
        let location = try await central.waitForEvents("sensorLocation", timeout: .seconds(30))
        #expect(location.first?["value"] as? Int == 2, "Bumble's sensor is worn on the wrist")
        let readings = try await central.waitForEvents("heartRate", count: 3, timeout: .seconds(60))
        let sent = try await sensor.waitForEvents("notified", count: 3, timeout: .seconds(30))
        #expect(readings.map(\.bpm) == [70, 300, 72], "\(central.diagnostics())")
        #expect(readings.map(\.bpm) == sent.map(\.bpm))
        #expect(readings.map(\.energyExpended) == sent.map(\.energyExpended))
        #expect(readings.map(\.rrIntervals) == sent.map(\.rrIntervals))
        try await pollUntil("the central exits after --count", timeout: .seconds(30)) { central.status != nil }
        #expect(central.status == 0, "\(central.diagnostics())")
        // The central unsubscribed before it exited: Bumble's sensor saw the CCC written back
        // (or the link go), and exits.
        try await pollUntil("Bumble's sensor exits", timeout: .seconds(30), diagnostics: sensor.diagnostics) {
            sensor.status != nil
        }
        #expect(sensor.events("subscribed").map { $0["notify"] as? Bool } == [true, false])
        #expect(sensor.status == 0, "\(sensor.diagnostics())")
        #expect(central.events("error").isEmpty && sensor.events("error").isEmpty)
    }

    /// Bumble's heart-rate client (`HeartRateServiceProxy`) against heart-rate-peripheral on the
    /// Bumble-backed adapter: it finds it by its Heart Rate service (a name in bluetoothd's scan
    /// response does not cross Bumble's LocalLink), reads the Body Sensor Location (Chest, 1), decodes three
    /// measurements that our peripheral sent, in a row, and writes the control point; anything
    /// Bumble cannot decode or refuses is its error and fails the run.
    ///
    /// This judge found a bluetoothd crash: 2 of 2 runs on 5.87, once on 5.82 (2026-12-06).
    /// Bumble's client writes the control point with a Write Command and drops the link soon
    /// after (at once, until a loaded guest lost the command: it now reads once more first);
    /// bluetoothd, which waits for our `WriteValue` answer because the characteristic has no
    /// write-without-response property, logs "Pending write was canceled when object got
    /// removed" as our answer arrives, and dies while handling our `UnregisterApplication` as
    /// heart-rate-peripheral exits. The cause is in bluetoothd (``KnownBluetoothdCrash/pendingWriteUseAfterFree``,
    /// read in its source, still there on master); that crash, with that line in its log, is a
    /// known issue, any other a failure, and everything our peripheral did is checked as before.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .pendingWriteUseAfterFree,
        .loadScaledTimeLimit(minutes: 3))
    func bumblesHeartRateClientAgainstOurPeripheral() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let client = try BumblePeer.start(
            "bumble_heart_rate_client.py", ["--count", "3", "--timeout", "150"])
        try await client.waitForEvents("scanning", timeout: .seconds(90))
        let peripheral = try ExampleProgram(
            "heart-rate-peripheral", ["--json", "--adapter", adapter, "--name", "Judged HRM", "--interval-ms", "300"],
            busAddress: nil)
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        try await pollUntil("Bumble's client exits", timeout: .seconds(120), diagnostics: client.diagnostics) {
            client.status != nil
        }
        #expect(client.status == 0, "\(client.diagnostics())")
        #expect(client.events("error").isEmpty)
        #expect(client.events("sensorLocation").first?["value"] as? Int == 1)

        // Three consecutive measurements of those our peripheral sent, decoded by Bumble; each
        // carries the RR interval that goes with its rate (60/bpm s, in 1/1024 s).
        let readings = client.events("heartRate")
        let received = readings.map(\.bpm)
        let sent = peripheral.events("notified").map(\.bpm)
        #expect(received.count == 3, "\(client.diagnostics())")
        let runs = sent.indices.filter { Array(sent[$0...].prefix(received.count)) == received }
        #expect(!runs.isEmpty, "Bumble got \(received), our peripheral sent \(sent)")
        for reading in readings {
            let bpm = Double(reading.bpm ?? 0)
            let rr = reading.rrIntervals.first ?? 0
            #expect(bpm > 0 && abs(rr - 60 / bpm) < 0.002, "\(reading)")
        }
        #expect(client.events("controlPoint").count == 1)
        let written = try await peripheral.waitForEvents("controlPoint", timeout: .seconds(30))
        #expect(written.first?["value"] as? [Int] == [1])
        let subscribed = try await peripheral.waitForEvents("subscribed")
        #expect(subscribed.contains { $0["characteristic"] as? String == "2A37" })
        try await peripheral.waitForEvents("unsubscribed", timeout: .seconds(30))
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        #expect(peripheral.events("error").isEmpty)
    }
}

/// The Bumble peers of the guest (`Scripts/guest/bumble_*.py`), run with the Python of the Bumble
/// venv that `bluez-vm setup --bumble` made, as ``ExampleProgram``s (empty signal mask, killed
/// with SIGKILL when a test leaves one behind).
enum BumblePeer {
    private static let environment = ProcessInfo.processInfo.environment
    /// The venv's python3 (`BLUEZKIT_BUMBLE_PYTHON`, exported by `bluez-vm run --bumble N`).
    static let python = environment["BLUEZKIT_BUMBLE_PYTHON"]
    /// The adapters bluetoothd manages on Bumble controllers (`BLUEZKIT_BUMBLE_ADAPTERS`).
    static let adapters = (environment["BLUEZKIT_BUMBLE_ADAPTERS"] ?? "").split(separator: " ").map(String.init)
    /// Whether the guest has a Bumble controller.
    static var available: Bool { insideEmulatedBlueZ && python != nil && !adapters.isEmpty }
    static let unavailable: Comment =
        "needs a Bumble controller: Scripts/test-e2e starts one (bluez-vm setup --bumble; bluez-vm run --bumble 1)"

    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/guest")

    /// Starts `script` (executable, `#!/usr/bin/env python3`) with the venv's bin first in PATH.
    static func start(_ script: String, _ arguments: [String]) throws -> ExampleProgram {
        let python = try #require(python)
        let bin = URL(fileURLWithPath: python).deletingLastPathComponent().path
        let path = environment["PATH"].map { "\(bin):\($0)" } ?? bin
        return try ExampleProgram(
            path: scripts.appendingPathComponent(script).path, arguments, busAddress: nil,
            environment: ["PATH": path, "PYTHONUNBUFFERED": "1"])
    }
}

extension Dictionary where Key == String, Value == Any {
    /// A heart-rate event's fields, as the peers and the examples print them.
    fileprivate var bpm: Int? { self["bpm"] as? Int }
    fileprivate var energyExpended: Int? { self["energyExpended"] as? Int }
    fileprivate var rrIntervals: [Double] {
        (self["rrIntervals"] as? [Any] ?? []).compactMap { ($0 as? NSNumber)?.doubleValue }
    }
}
