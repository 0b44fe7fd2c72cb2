import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real `dbus-daemon` on a private Unix socket, for tests — never the machine's own bus.
///
/// The daemon runs with a permissive policy (anyone may own any name and
/// call anything) and stops on `stop()` or deinit. A client may take 5 minutes to
/// authenticate (`auth_timeout`, 30 s by default): the whole fast tier under ThreadSanitizer
/// on two busy cores can starve a client that long, and the likely cause of one
/// `SimulatedBlueZ.start()` failing with "the connection is closed" (2026-12-06) is the daemon
/// closing it. Point a library at it with
/// `DBUS_SYSTEM_BUS_ADDRESS=<address>` or open connections to `address`.
package final class PrivateBusDaemon: @unchecked Sendable {
    /// The address to connect to, such as `unix:path=/tmp/…/bus,guid=…` (a new GUID after
    /// ``restart()``; the path stays).
    package var address: String {
        lock.lock()
        defer { lock.unlock() }
        return currentAddress
    }
    /// The folder holding the socket and configuration, removed on stop.
    package var directoryPath: String { directory.path }
    private let directory: URL
    private let executable: String
    private let lock = NSLock()
    private var currentAddress: String
    private var pid: pid_t
    private var stopped = false
    /// False between ``kill()`` and ``relaunch()``.
    private var running = true

    /// Starts a daemon and waits until it listens.
    ///
    /// Errors: `failed` when `dbus-daemon` is missing or does not start.
    package init(executable: String = "/usr/bin/dbus-daemon") throws(DBusError) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "bluezkit-bus-\(UUID().uuidString.prefix(8))")
        let socket = directory.appendingPathComponent("bus").path
        let config = directory.appendingPathComponent("bus.conf")
        let xml = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>bluezkit-test</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_type="method_return"/>
                <allow send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="signal"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
              <limit name="max_replies_per_connection">50000</limit>
              <limit name="max_connections_per_user">10000</limit>
              <limit name="auth_timeout">300000</limit>
            </busconfig>
            """
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try xml.write(to: config, atomically: true, encoding: .utf8)
        } catch {
            throw DBusError(.failed, "cannot write the bus configuration: \(error)")
        }
        (self.pid, self.currentAddress) = try Self.spawn(executable, config: config.path)
        self.directory = directory
        self.executable = executable
    }

    /// Starts `dbus-daemon` with `config`; returns its pid and printed address once it listens.
    private static func spawn(_ executable: String, config: String) throws(DBusError) -> (pid_t, String) {
        // posix_spawn rather than Foundation.Process: stopping must work from a
        // deinit at process exit, where Process.waitUntilExit can hang.
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { throw DBusError(.failed, "pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        // Nothing of ours stays open in the daemon: it must not hold a caller's pipes.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let arguments = [executable, "--nofork", "--nopidfile", "--print-address=1", "--config-file=\(config)"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, &argv, environ)
        close(pipeFDs[1])
        defer { close(pipeFDs[0]) }
        guard spawned == 0 else { throw DBusError(.failed, "cannot start \(executable): error \(spawned)") }
        // The daemon prints its address once it listens.
        var printed: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !printed.contains(UInt8(ascii: "\n")) {
            let n = read(pipeFDs[0], &buffer, buffer.count)
            if n <= 0 { break }
            printed += buffer[0..<n]
        }
        guard let line = String(decoding: printed, as: UTF8.self).split(separator: "\n").first, !line.isEmpty else {
            Glibc.kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
            throw DBusError(.failed, "\(executable) did not print its address")
        }
        return (pid, String(line))
    }

    /// The daemon's process id.
    package var processIdentifier: Int32 {
        lock.lock()
        defer { lock.unlock() }
        return pid
    }

    /// Kills the daemon and starts a new one listening on the same socket path, as when the
    /// system's `dbus-daemon` restarts: every connection to the old one is lost, its names and
    /// match rules with it. Errors: `failed` when the new daemon does not start, or after `stop()`.
    package func restart() throws(DBusError) {
        kill()
        try relaunch()
    }

    /// Kills the daemon and removes its socket, keeping the folder: the bus is down until
    /// ``relaunch()``. Idempotent.
    package func kill() {
        lock.lock()
        defer { lock.unlock() }
        guard running, !stopped else { return }
        running = false
        Glibc.kill(pid, SIGKILL)
        SystemCall.waitForExit(pid)
        unlink(directory.appendingPathComponent("bus").path)
    }

    /// Starts a daemon again on the same socket path after ``kill()``; does nothing if it runs.
    /// Errors: `failed` when the daemon does not start, or after `stop()`.
    package func relaunch() throws(DBusError) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { throw DBusError(.failed, "the daemon was stopped") }
        guard !running else { return }
        (pid, currentAddress) = try Self.spawn(executable, config: directory.appendingPathComponent("bus.conf").path)
        running = true
    }

    /// Stops the daemon (idempotent) and removes its folder.
    package func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        if running {
            running = false
            Glibc.kill(pid, SIGKILL)  // a test bus keeps nothing worth a clean shutdown
            SystemCall.waitForExit(pid)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
