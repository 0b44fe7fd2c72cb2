import Foundation
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
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluezkit-e2e-\(UUID().uuidString.prefix(8))")
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
    }

    func log(_ script: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("\(script).log"), encoding: .utf8)) ?? ""
    }

    func stop() {
        for process in processes where process.isRunning { process.terminate() }
        processes.removeAll()
    }

    deinit { stop() }
}
