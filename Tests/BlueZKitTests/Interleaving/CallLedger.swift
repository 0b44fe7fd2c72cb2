import Foundation
import Locking

/// Every async call and stream a run started: when it started, was cancelled, ended, and with
/// what; which manager (role and generation) it belongs to; and the first invariant broken.
///
/// The invariant behind `Sendable`: all state sits behind a `PosixMutex`.
final class CallLedger: Sendable {
    enum Role: String, Sendable { case central, peripheral }

    struct Entry: Sendable {
        let what: String
        let role: Role
        let generation: Int
        let isStream: Bool
        var cancelled: ContinuousClock.Instant?
        var ended: ContinuousClock.Instant?
        var outcome: String?
    }

    private struct State: Sendable {
        var entries: [Entry] = []
        var violation: InterleavingViolation?
    }

    private let state = PosixMutex(State())

    /// Records a call (or a stream, consumed until it finishes) and returns its number.
    func begin(_ what: String, role: Role, generation: Int, isStream: Bool = false) -> Int {
        state.withLock { state in
            state.entries.append(
                Entry(what: what, role: role, generation: generation, isStream: isStream, cancelled: nil, ended: nil))
            return state.entries.count - 1
        }
    }

    func cancelled(_ id: Int) {
        state.withLock { state in
            if state.entries[id].cancelled == nil { state.entries[id].cancelled = .now }
        }
    }

    func ended(_ id: Int, _ outcome: String) {
        state.withLock { state in
            state.entries[id].ended = .now
            state.entries[id].outcome = outcome
        }
    }

    /// Records a broken invariant (the first one counts).
    func violate(_ invariant: InterleavingInvariant, _ detail: String) {
        state.withLock { state in
            if state.violation == nil { state.violation = InterleavingViolation(invariant: invariant, detail: detail) }
        }
    }

    var violation: InterleavingViolation? { state.withLock { $0.violation } }

    /// Calls cancelled longer than `bound` ago that have not ended.
    func overdueAfterCancel(bound: Duration) -> [Entry] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.entries.filter { entry in
                guard !entry.isStream, entry.ended == nil, let cancelled = entry.cancelled else { return false }
                return now - cancelled > bound
            }
        }
    }

    /// Calls and streams of `role`'s manager `generation` that have not ended.
    func open(role: Role, generation: Int) -> [Entry] {
        state.withLock { state in
            state.entries.filter { $0.role == role && $0.generation == generation && $0.ended == nil }
        }
    }

    /// Calls (not streams) that have not ended.
    var openCalls: [Entry] { state.withLock { $0.entries.filter { !$0.isStream && $0.ended == nil } } }

    /// Every call and stream with its outcome, in the order they started (for tracing a run).
    var trace: [String] {
        state.withLock { state in
            state.entries.map { "\($0.what) [\($0.role) #\($0.generation)]: \($0.outcome ?? "open")" }
        }
    }

    /// Whether call `id` has ended.
    func hasEnded(_ id: Int) -> Bool { state.withLock { $0.entries[id].ended != nil } }
}
