import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The guest's system bus restarting under our two example programs (issue 18): `dbus-daemon`
/// is killed (bluetoothd exits with it, as it does when it loses the bus) and both are started
/// again. The programs must notice, connect to the new bus by themselves and carry on.
extension EndToEndTests {
    @Test(.loadScaledTimeLimit(minutes: 4)) func valuesFlowAgainAfterTheSystemBusRestarts() async throws {
        let state = try Self.stateDirectory()
        let (central, peripheral) = try await Self.startExamples(state: state)
        let before = central.events("heartRate").count
        try await SystemBus.restart()
        // Readings after the disconnection the restart caused need everything back: the
        // central's and the peripheral's bus connections, bluetoothd, the peripheral's published
        // service and advertisement, the link, and the subscription.
        try await Self.waitForReadingsAfterTheDisconnection(of: central, timeout: .seconds(150))
        #expect(central.events("heartRate").count >= before + 3)
        for program in [central, peripheral] {
            let states = program.events("state").compactMap { $0["state"] as? String }
            #expect(states.contains("resetting"), "\(program.name): \(states)")
            #expect(states.last == "poweredOn", "\(program.name): \(states)")
        }
        #expect(try await central.stop() == 0, "\(central.diagnostics())")
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
    }
}

/// The guest's system bus (`Scripts/guest/vm-init` starts `dbus-daemon --system`).
enum SystemBus {
    /// Kills `dbus-daemon --system`, waits for bluetoothd to exit with it, then starts both again
    /// (bluetoothd with its command line), waiting until the adapters are powered.
    static func restart() async throws {
        guard let bluetoothd = Bluetoothd.running() else {
            throw ExampleProgramError(description: "no bluetoothd is running")
        }
        guard let daemon = daemonPID() else { throw ExampleProgramError(description: "no system dbus-daemon runs") }
        kill(daemon, SIGTERM)
        try await pollUntil("dbus-daemon \(daemon) exited", timeout: .seconds(10)) { kill(daemon, 0) != 0 }
        // bluetoothd quits its main loop when it loses the bus; stop it if it has not yet.
        do {
            try await pollUntil("bluetoothd exited with the bus", timeout: .seconds(10)) { kill(bluetoothd.0, 0) != 0 }
        } catch {
            kill(bluetoothd.0, SIGTERM)
            try await pollUntil("bluetoothd stopped", timeout: .seconds(10)) { kill(bluetoothd.0, 0) != 0 }
        }
        try await ensureRunning()
        try Bluetoothd.start(bluetoothd.1)
        try await Bluetoothd.waitUntilAdaptersPowered()
    }

    /// Starts `dbus-daemon --system` as the guest does, unless one runs.
    static func ensureRunning() async throws {
        guard daemonPID() == nil else { return }
        // The old socket file stays behind a killed daemon; the new one listens in its place.
        _ = unlink("/run/dbus/system_bus_socket")
        _ = try await Tool.output("/usr/bin/dbus-daemon", ["--system", "--fork", "--nopidfile"])
    }

    /// The pid of the running `dbus-daemon --system`, found in /proc; nil if none runs.
    static func daemonPID() -> pid_t? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry),
                let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), !data.isEmpty
            else { continue }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if arguments.first?.hasSuffix("dbus-daemon") == true, arguments.contains("--system") { return pid }
        }
        return nil
    }
}
