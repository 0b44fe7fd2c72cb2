import Foundation
import Synchronization
import TestSupport

/// An interactive `bluetoothctl` fed line by line — BlueZ's own client as the judge of our
/// peripheral. Its output is collected for the test to wait on.
final class BluetoothctlSession: Sendable {
    private let pid: pid_t
    private let input: Int32
    private let collected = Captured()

    private final class Captured: Sendable {
        let text = Mutex("")
        let exited = Atomic<Bool>(false)
    }

    init() throws {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw CocoaError(.fileWriteUnknown) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 2)
        for fd in toChild + fromChild { posix_spawn_file_actions_addclose(&actions, fd) }
        let path = Self.executable
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else {
            throw CocoaError(.executableNotLoadable)
        }
        close(toChild[0])
        close(fromChild[1])
        self.pid = pid
        self.input = toChild[1]
        let registered = collected
        let started = pid
        let stop: @Sendable () -> Void = {
            guard !registered.exited.load(ordering: .acquiring) else { return }
            kill(started, SIGKILL)
            for _ in 0..<250 where !registered.exited.load(ordering: .acquiring) { usleep(20_000) }
        }
        RunningPrograms.register("bluetoothctl", output: { registered.text.withLock { $0 } }, stop: stop)
        let output = fromChild[0]
        let collected = self.collected
        let child = pid
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(output, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                let text = String(decoding: buffer[0..<n], as: UTF8.self)
                collected.text.withLock { $0 += text }
            }
            close(output)
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            collected.exited.store(true, ordering: .releasing)
        }
    }

    /// Everything bluetoothctl printed so far (terminal escapes included).
    var output: String { collected.text.withLock { $0 } }

    /// The output after `mark` characters (take `output.count` before sending a command).
    func output(after mark: Int) -> Substring { output.dropFirst(mark) }

    /// Types one command.
    func send(_ command: String) {
        let line = Array((command + "\n").utf8)
        _ = line.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
    }

    /// Quits bluetoothctl (its D-Bus client, and so its discovery session, end with it).
    func stop() {
        send("quit")
        close(input)
        for _ in 0..<100 where !collected.exited.load(ordering: .acquiring) { usleep(20_000) }
        if !collected.exited.load(ordering: .acquiring) { kill(pid, SIGKILL) }
    }

    /// An adapter's address, from bluetoothd (`busctl get-property`).
    /// The bluetoothctl of the guest's bluetoothd: `BLUEZKIT_BLUETOOTHCTL` when `bluez-vm run
    /// --bluez` runs a fetched version (its own client: Debian 13's 5.82 never lists a 5.66
    /// bluetoothd's GATT objects), else the machine's own.
    static var executable: String {
        ProcessInfo.processInfo.environment["BLUEZKIT_BLUETOOTHCTL"] ?? "/usr/bin/bluetoothctl"
    }

    static func address(of adapter: String) async throws -> String {
        let text = try await Tool.output(
            "/usr/bin/busctl",
            ["get-property", "org.bluez", "/org/bluez/\(adapter)", "org.bluez.Adapter1", "Address"])
        // s "00:AA:01:01:00:24"
        guard let address = text.split(separator: "\"").dropFirst().first else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return String(address)
    }
}
