import BlueZ
import Locking

/// The restoration of one manager created with a restore identifier: its claim on the
/// identifier, the state saved by an earlier process (taken once), and saving on change.
///
/// Created synchronously when the manager is, so the saved state is read before anything
/// could overwrite it. Failures are logged once and kept in ``error``; a save that fails is
/// retried with the next change. The invariant behind `Sendable`: state behind a `PosixMutex`.
/// A manager's saved state.
protocol RestorationRecord: Codable, Hashable, Sendable {
    /// Nothing to restore: the saved state is removed instead of written, so that a later
    /// manager gets no `willRestoreState` (as on iOS, where only pending work is restored).
    var isEmpty: Bool { get }
}

final class ManagerRestoration<Record: RestorationRecord>: Sendable {
    let identifier: String
    let store: RestorationStore
    private let role: RestorationStore.Role
    private let state: PosixMutex<State>
    /// Writes the saved state, coalesced, off the manager's queue; nil without a claim.
    let writer: RestorationWriter<Record>?

    private struct State: Sendable {
        var claim: RestorationClaim?
        var saved: Record?
        var error: RestorationError?
    }

    /// Claims `identifier` in `store` and reads what it holds for `role`.
    init(identifier: String, store: RestorationStore, role: RestorationStore.Role) {
        self.identifier = identifier
        self.store = store
        self.role = role
        var initial = State()
        do throws(RestorationError) {
            initial.claim = try store.claim(identifier)
        } catch {
            BlueZLog.warning("restore identifier \(String(reflecting: identifier)): \(error)")
            initial.error = error
            state = PosixMutex(initial)
            writer = nil
            return
        }
        do throws(RestorationError) {
            initial.saved = try store.load(Record.self, role: role, for: identifier)
        } catch {
            BlueZLog.warning("saved state of \(String(reflecting: identifier)) ignored: \(error)")
            initial.error = error
        }
        state = PosixMutex(initial)
        writer = RestorationWriter(lastWritten: initial.saved, label: "bluezkit.restoration") { record in
            Self.write(record, store: store, role: role, identifier: identifier)
        }
    }

    /// The last state is written before the claim on the identifier goes.
    deinit {
        writer?.flush()
    }

    /// True when another live manager holds the identifier: this one must not run.
    var isRefused: Bool { state.withLock { $0.claim == nil } }

    /// Why restoration did not happen, if it did not: the identifier in use, or unreadable state.
    var error: RestorationError? { state.withLock { $0.error } }

    /// The saved state, once (nil when there was none or it was unreadable).
    func takeSavedState() -> Record? {
        state.withLock { state in
            defer { state.saved = nil }
            return state.saved
        }
    }

    /// Saves `record` when it differs from what was written last (removes the saved state when
    /// `record` is empty): on the writer's queue, at most once a second, the newest state (see
    /// ``RestorationWriter``).
    func save(_ record: Record) {
        writer?.submit(record)
    }

    /// Writes `record` (or removes the file for an empty one); false, logged, when that failed.
    private static func write(
        _ record: Record, store: RestorationStore, role: RestorationStore.Role, identifier: String
    )
        -> Bool
    {
        do throws(RestorationError) {
            if record.isEmpty {
                try store.removeState(for: identifier)
            } else {
                try store.save(record, role: role, for: identifier)
            }
            return true
        } catch {
            BlueZLog.warning("could not save the state of \(String(reflecting: identifier)): \(error)")
            return false
        }
    }
}
