import Dispatch
import Foundation

/// What the flood peer received or sent so far; updated on the delegate queue, read on the
/// reporting queue. The invariant behind `@unchecked Sendable`: every access holds `lock`.
final class FloodCounters: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: Int] = [:]
    private let started = ContinuousClock.now

    /// Adds `amount` to the counter `key`.
    func add(_ key: String, _ amount: Int = 1) {
        lock.withLock { values[key, default: 0] += amount }
    }

    /// Sets the counter `key`.
    func set(_ key: String, _ value: Int) {
        lock.withLock { values[key] = value }
    }

    /// Emits the counters as a `count` line every second and as a `final` line on SIGINT or
    /// SIGTERM (then exits), from a queue of their own; returns the sources, to keep alive.
    func startReporting() -> [any DispatchSourceProtocol] {
        let queue = DispatchQueue(label: "flood-peer.reports")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { FloodOutput.emit("count", self.snapshot()) }
        timer.resume()
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceProtocol in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                FloodOutput.emit("final", self.snapshot())
                exit(0)
            }
            source.resume()
            return source
        }
        return [timer] + signals
    }

    /// The counters, and the seconds since the program started.
    func snapshot() -> [String: any Sendable] {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var fields: [String: any Sendable] = lock.withLock { values }
        fields["seconds"] = (seconds * 1000).rounded() / 1000
        return fields
    }
}

/// The JSON lines on standard output.
enum FloodOutput {
    private static let lock = NSLock()

    /// Writes `{"event": event, ...fields}` as one line, at once.
    static func emit(_ event: String, _ fields: [String: any Sendable] = [:]) {
        var object = fields
        object["event"] = event
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        lock.withLock { FileHandle.standardOutput.write(data + Data("\n".utf8)) }
    }

    /// A line on standard error.
    static func fail(_ message: String) {
        FileHandle.standardError.write(Data("flood-peer: \(message)\n".utf8))
    }
}
