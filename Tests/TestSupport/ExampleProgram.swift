public import Foundation
import Locking
public import Testing

/// One of the built example programs, run with `--json` and read line by line.
///
/// The executables sit next to the test bundle (SwiftPM builds them with the tests). The
/// program's standard output is parsed as JSON lines; standard error is kept for messages.
public final class ExampleProgram: Sendable {
    /// The program's name.
    public let name: String
    /// The process ID (the program itself, also when started through a launcher that execs it).
    public let pid: pid_t
    /// What the reader threads fill in.
    private final class Captured: Sendable {
        let lines = PosixMutex<[String]>([])
        let errors = PosixMutex<[UInt8]>([])
        let exitStatus = PosixMutex<Int32?>(nil)
    }
    private let captured = Captured()

    /// The directory of the test bundle, where SwiftPM put the example executables.
    public static var buildDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// Starts `name` with `arguments`, on the bus at `busAddress` (nil: inherit the environment).
    ///
    /// In the end-to-end tier (`BLUEZKIT_E2E` set) our examples print BlueZKit's debug lines
    /// (`BLUEZKIT_LOG=debug`: each failed connect attempt, the agent's calls) unless `extra` says
    /// otherwise, so that a failure report shows what the library did: a CI run once left only a
    /// central that never reconnected, with nothing to tell why.
    public convenience init(
        _ name: String, _ arguments: [String], busAddress: String?, environment extra: [String: String] = [:]
    ) throws {
        var environment = extra
        if ProcessInfo.processInfo.environment["BLUEZKIT_E2E"] != nil, environment["BLUEZKIT_LOG"] == nil {
            environment["BLUEZKIT_LOG"] = "debug"
        }
        try self.init(
            path: Self.buildDirectory.appendingPathComponent(name).path, arguments, busAddress: busAddress,
            environment: environment)
    }

    /// Starts the executable at `path` (any program, such as a script of ours) like an example.
    public init(path: String, _ arguments: [String], busAddress: String?, environment extra: [String: String] = [:])
        throws
    {
        self.name = URL(fileURLWithPath: path).lastPathComponent
        guard FileManager.default.isExecutableFile(atPath: path) else {
            let built = path.hasPrefix(Self.buildDirectory.path)
            throw ExampleProgramError(
                description: built
                    ? "\(path) is not built (swift build builds it)"
                    : "\(path) is not installed or not executable (a package the scripts should install?)")
        }
        var environment = ProcessInfo.processInfo.environment
        if let busAddress { environment["DBUS_SYSTEM_BUS_ADDRESS"] = busAddress }
        environment.merge(extra) { _, new in new }
        let out = try Self.pipe()
        let err = try Self.pipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)
        posix_spawn_file_actions_addclose(&actions, out.read)
        posix_spawn_file_actions_addclose(&actions, err.read)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        // The test runner's threads may block signals; the child must not inherit that, or
        // SIGTERM would never reach it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        close(out.write)
        close(err.write)
        guard spawned == 0 else {
            close(out.read)
            close(err.read)
            throw ExampleProgramError(description: "cannot start \(path): error \(spawned)")
        }
        self.pid = pid
        let child = pid
        let captured = self.captured
        Self.register(name, pid: pid, captured)
        // The status is set last, once both pipes are drained: a test that sees the program
        // ended then sees all it wrote, on standard error too.
        let errorsDrained = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(out.read, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending += buffer[0..<n]
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    captured.lines.withLock { $0.append(line) }
                }
            }
            if !pending.isEmpty {
                let line = String(decoding: pending, as: UTF8.self)
                captured.lines.withLock { $0.append(line) }
            }
            close(out.read)
            errorsDrained.wait()
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED ? WEXITSTATUS : 128 + signal
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            captured.exitStatus.withLock { $0 = code }
        }
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(err.read, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                captured.errors.withLock { $0 += buffer[0..<n] }
            }
            close(err.read)
            errorsDrained.signal()
        }
    }

    /// Lists the program in ``RunningPrograms``: its output for reports, and a stop that kills
    /// it if it still runs (its reading thread reaps it, so the pid is not reused before).
    private static func register(_ name: String, pid: pid_t, _ captured: Captured) {
        let render: @Sendable () -> String = {
            let lines = captured.lines.withLock { $0 }
            let errors = String(decoding: captured.errors.withLock { $0 }, as: UTF8.self)
            return "--- stdout:\n\(lines.joined(separator: "\n"))\n--- stderr:\n\(errors)"
        }
        RunningPrograms.register(name, output: render) {
            guard captured.exitStatus.withLock({ $0 }) == nil else { return }
            kill(pid, SIGKILL)
            let deadline = ContinuousClock.now + .seconds(5)
            while captured.exitStatus.withLock({ $0 }) == nil && ContinuousClock.now < deadline { usleep(10_000) }
        }
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { throw ExampleProgramError(description: "pipe failed") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    /// Every line printed so far.
    public var output: [String] { captured.lines.withLock { $0 } }

    /// What the program wrote to standard error.
    public var standardError: String { String(decoding: captured.errors.withLock { $0 }, as: UTF8.self) }

    /// The JSON events printed so far (lines that are not JSON objects are left out).
    public var events: [[String: Any]] {
        output.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// The events named `name`.
    public func events(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }

    /// The exit status once the program ended (128 + signal when a signal ended it).
    public var status: Int32? { captured.exitStatus.withLock { $0 } }

    /// Waits until at least `count` events named `name` were printed; returns them.
    @discardableResult
    public func waitForEvents(_ name: String, count: Int = 1, timeout: Duration = .seconds(20)) async throws
        -> [[String: Any]]
    {
        try await pollUntil("\(self.name) printed \(count)× \(name)", timeout: timeout, diagnostics: diagnostics) {
            self.events(name).count >= count || self.status != nil
        }
        let found = events(name)
        guard found.count >= count else {
            throw ExampleProgramError(
                description: "\(self.name) exited (\(status ?? -1)) before \(name)\n\(diagnostics())")
        }
        return found
    }

    /// Sends `signal` to the program if it still runs, a command for programs that act on one.
    public func send(_ signal: Int32) {
        if status == nil { kill(pid, signal) }
    }

    /// Sends `signal` and waits for the program to exit; returns its status.
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(20)) async throws -> Int32 {
        if status == nil { kill(pid, signal) }
        try await pollUntil("\(name) exited", timeout: timeout, diagnostics: diagnostics) { self.status != nil }
        return status ?? -1
    }

    /// What to print when a wait fails.
    public func diagnostics() -> String {
        "--- \(name) stdout:\n\(output.joined(separator: "\n"))\n--- stderr:\n\(standardError)"
    }

    deinit {
        if status == nil { kill(pid, SIGKILL) }
    }
}

/// A program that could not run or did not print what was waited for.
public struct ExampleProgramError: Error, CustomStringConvertible {
    /// What happened.
    public let description: String

    /// An error that says `description`.
    public init(description: String) { self.description = description }
}

/// Polls `condition` every 5 ms until it holds (no fixed sleep stands in for it); after `timeout`
/// (times ``TestTime/scale``) records an issue at the caller, with `diagnostics`, and throws.
public func pollUntil(
    _ what: String, timeout: Duration = .seconds(20), diagnostics: () -> String = { "" },
    sourceLocation: SourceLocation = SourceLocation(fileID: #fileID, filePath: #filePath, line: #line, column: #column),
    _ condition: () async throws -> Bool
) async throws {
    let timeout = TestTime.scaled(timeout)
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    if try await condition() { return }
    Issue.record("timed out after \(timeout) waiting until \(what)\n\(diagnostics())", sourceLocation: sourceLocation)
    throw ExampleProgramError(description: "timed out waiting until \(what)")
}

/// ``pollUntil(_:timeout:diagnostics:sourceLocation:_:)`` with a 10 s timeout: the wait every
/// test target uses.
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(10),
    sourceLocation: SourceLocation = SourceLocation(fileID: #fileID, filePath: #filePath, line: #line, column: #column),
    _ condition: () async throws -> Bool
) async throws {
    try await pollUntil(what, timeout: timeout, sourceLocation: sourceLocation, condition)
}
