import Foundation

/// Prints the examples' events: one human line each, or with `--json` one JSON object per
/// line with an `"event"` key (keys sorted, so lines are stable for scripts and tests).
public struct EventOutput: Sendable {
    /// Whether to print JSON lines.
    public let json: Bool

    /// An output; `json` picks JSON lines.
    public init(json: Bool) { self.json = json }

    /// Prints one event: `human` as is, or `event` with `fields` as a JSON object. Flushes at once.
    public func emit(_ event: String, _ fields: [String: any Sendable] = [:], human: @autoclosure () -> String) {
        if json {
            var object: [String: Any] = ["event": event]
            for (key, value) in fields { object[key] = value }
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                FileHandle.standardOutput.write(data + Data("\n".utf8))
            }
        } else {
            FileHandle.standardOutput.write(Data((human() + "\n").utf8))
        }
    }

    /// Prints an error event (`"message"`) and, for humans, to standard error.
    public func error(_ message: String) {
        if json {
            emit("error", ["message": message], human: message)
        } else {
            FileHandle.standardError.write(Data(("error: " + message + "\n").utf8))
        }
    }
}
