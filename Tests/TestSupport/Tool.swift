import Foundation

/// A command-line tool run to completion with a bounded wait: a tool that hangs (bluetoothctl
/// waiting for a bluetoothd that does not answer, say) is killed and reported, never waited for
/// for ever.
public enum Tool {
    /// What a tool printed and how it ended.
    public struct Result: Sendable {
        /// The exit status (128 + signal when a signal ended it).
        public let status: Int32
        /// Standard output.
        public let output: String
        /// Standard error.
        public let errors: String
    }

    /// Runs `path` with `arguments` and waits at most `timeout` for it to exit. Throws when it
    /// cannot start or does not exit in time (it is killed then); a non-zero status is returned,
    /// not thrown.
    public static func run(_ path: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws
        -> Result
    {
        let program = try ExampleProgram(path: path, arguments, busAddress: nil)
        do {
            try await pollUntil("\(program.name) \(arguments.joined(separator: " ")) exited", timeout: timeout) {
                program.status != nil
            }
        } catch {
            _ = try? await program.stop(signal: SIGKILL, timeout: .seconds(5))
            throw error
        }
        return Result(
            status: program.status ?? -1, output: program.output.joined(separator: "\n"),
            errors: program.standardError)
    }

    /// ``run(_:_:timeout:)`` that throws unless the tool exits with status 0; returns its output.
    @discardableResult
    public static func output(_ path: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws
        -> String
    {
        let result = try await run(path, arguments, timeout: timeout)
        guard result.status == 0 else {
            throw ExampleProgramError(
                description: "\(path) \(arguments.joined(separator: " ")) exited \(result.status): \(result.errors)")
        }
        return result.output
    }
}
