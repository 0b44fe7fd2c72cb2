import Foundation
import TestSupport
import Testing

/// BlueZ's own `example-gatt-server` and `example-advertisement` (package
/// bluez-test-scripts) running on hci1 — a peripheral nobody here wrote.
///
/// The scripts pick the first adapter; copies made at test time are bound to
/// hci1. They need Debian's `/usr/bin/python3` with python3-dbus.
final class ExamplePeripheral: @unchecked Sendable {
    static let examples = "/usr/share/doc/bluez-test-scripts/examples"
    let directory: URL
    private var processes: [Process] = []

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "bluezkit-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try patch(
            "example-gatt-server", "if GATT_MANAGER_IFACE in props.keys():",
            "if GATT_MANAGER_IFACE in props.keys() and o == '/org/bluez/hci1':")
        try patch(
            "example-advertisement", "if LE_ADVERTISING_MANAGER_IFACE in props:",
            "if LE_ADVERTISING_MANAGER_IFACE in props and o == '/org/bluez/hci1':")
    }

    private func patch(_ script: String, _ from: String, _ to: String) throws {
        let text = try String(contentsOfFile: "\(Self.examples)/\(script)", encoding: .utf8)
        #expect(text.contains(from), "\(script) no longer contains the adapter lookup to patch")
        try text.replacingOccurrences(of: from, with: to)
            .write(to: directory.appendingPathComponent(script), atomically: true, encoding: .utf8)
    }

    /// Starts one script; its output goes to `<script>.log`.
    func start(_ script: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [directory.appendingPathComponent(script).path]
        process.environment = ProcessInfo.processInfo.environment.merging(["PYTHONUNBUFFERED": "1"]) { _, new in new }
        let log = directory.appendingPathComponent("\(script).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        processes.append(process)
        let logText: @Sendable () -> String = { [directory] in
            (try? String(contentsOf: directory.appendingPathComponent("\(script).log"), encoding: .utf8)) ?? ""
        }
        RunningPrograms.register(script, output: logText) { [weak self] in self?.stop() }
    }

    /// Makes bluetoothd forget every device of every adapter (`Adapter1.RemoveDevice` through
    /// busctl, which answers once a connected device is disconnected) and waits until none is
    /// left, so that a test neither inherits the GATT database bluetoothd cached for hci1's
    /// address from an earlier test nor a link an earlier test's central left up (a restored
    /// central keeps its links when it exits; a test that then connects would get the old link
    /// and the old link's GATT client). Throws when a device is still there after 20 s.
    static func forgetKnownDevices() async throws {
        for device in try await PairingTools.devicePaths() { try await PairingTools.removeDevice(device) }
        var left: [String] = []
        let cleared: () async throws -> Bool = {
            left = (try? await PairingTools.devicePaths()) ?? ["(busctl failed)"]
            if !left.isEmpty { try await Task.sleep(for: .milliseconds(100)) }  // busctl is a process
            return left.isEmpty
        }
        try await pollUntil(
            "every device forgotten", timeout: .seconds(20), diagnostics: { "still there: \(left)" }, cleared)
    }

    func log(_ script: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("\(script).log"), encoding: .utf8)) ?? ""
    }

    /// Stops the scripts and waits until they have exited, so that bluetoothd
    /// drops their application and advertisement before the next test registers its own.
    func stop() {
        for process in processes where process.isRunning { process.terminate() }
        // Process.waitUntilExit can hang here; poll the exit instead (cleanup, bounded). The
        // scripts inherit the test runner's signal mask, where SIGTERM can be blocked: a script
        // that outlives it is killed, or bluetoothd would keep its application registered.
        var deadline = Date().addingTimeInterval(3)
        while processes.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        deadline = Date().addingTimeInterval(10)
        while processes.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
        processes.removeAll()
    }

    deinit { stop() }
}
