import Locking

/// Every program the tests started, so that a test's scope can stop what the test left running
/// and print what those programs wrote when the test failed.
///
/// ``ExampleProgram`` registers itself; other launchers (scripts, bluetoothctl) register with
/// ``register(_:output:stop:)``. Entries stay until ``remove(after:)`` drops them: the
/// end-to-end scope does so at the end of each test, and the fast tier's few programs stay listed
/// for the rest of the run (a name and two closures each).
public enum RunningPrograms {
    /// One started program.
    public struct Entry: Sendable {
        /// Increases with every registration: a scope takes the last one before its test runs.
        public let serial: Int
        /// The program's name, for reports.
        public let name: String
        /// What it wrote so far (standard output, then standard error).
        public let output: @Sendable () -> String
        /// Stops it if it still runs and waits (bounded) until it has exited.
        public let stop: @Sendable () -> Void
    }

    private static let entries = PosixMutex<(next: Int, list: [Entry])>((0, []))

    /// Lists a program; `stop` must be safe to call after the program ended.
    @discardableResult
    public static func register(
        _ name: String, output: @escaping @Sendable () -> String, stop: @escaping @Sendable () -> Void
    ) -> Int {
        entries.withLock { state in
            state.next += 1
            state.list.append(Entry(serial: state.next, name: name, output: output, stop: stop))
            return state.next
        }
    }

    /// The serial of the newest registration (0 before the first).
    public static var lastSerial: Int { entries.withLock { $0.next } }

    /// Removes and returns the programs registered after `serial`.
    public static func remove(after serial: Int) -> [Entry] {
        entries.withLock { state in
            let started = state.list.filter { $0.serial > serial }
            state.list.removeAll { $0.serial > serial }
            return started
        }
    }
}
