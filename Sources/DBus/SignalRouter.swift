import Locking
import Synchronization

/// A live signal subscription. Cancelling it (or releasing the last reference)
/// stops delivery at once — no handler runs after `cancel()` returns — and
/// removes the match rule from the bus when no other subscription uses it.
package final class DBusSubscription: Sendable {
    let isCancelled = Atomic<Bool>(false)
    private let onCancel: PosixMutex<(@Sendable () -> Void)?>

    init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = PosixMutex(onCancel) }

    /// Stops the subscription; idempotent.
    package func cancel() {
        guard !isCancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { cancel() }
}

/// Which handlers get an incoming signal: a dictionary by object path for
/// rules that name a path, and a short list for the rest (path namespaces,
/// whole interfaces). Reference counts of rule strings decide AddMatch /
/// RemoveMatch. Queue-confined value owned by the connection.
struct SignalRouter {
    /// A class, so that delivering a signal retains one reference instead of copying every field.
    final class Entry: Sendable {
        let id: UInt64
        let rule: DBusMatchRule
        let state: DBusSubscriptionState
        let handler: @Sendable (DBusMessage) -> Void
        init(
            id: UInt64, rule: DBusMatchRule, state: DBusSubscriptionState,
            handler: @escaping @Sendable (DBusMessage) -> Void
        ) {
            self.id = id
            self.rule = rule
            self.state = state
            self.handler = handler
        }
    }

    /// The cancelled flag, shared with the subscription object without keeping it alive.
    final class DBusSubscriptionState: Sendable {
        weak let subscription: DBusSubscription?
        init(_ subscription: DBusSubscription) { self.subscription = subscription }
        var isCancelled: Bool { subscription?.isCancelled.load(ordering: .acquiring) ?? true }
    }

    private(set) var byPath: [ObjectPath: [Entry]] = [:]
    private(set) var unrouted: [Entry] = []
    /// Each distinct rule (by its bus syntax) and how many entries use it.
    private var ruleCounts: [String: (rule: DBusMatchRule, count: Int)] = [:]
    private var nextID: UInt64 = 0

    /// Adds an entry; returns its id and whether the bus needs an AddMatch for its rule.
    mutating func add(
        _ rule: DBusMatchRule, state: DBusSubscriptionState, handler: @escaping @Sendable (DBusMessage) -> Void
    ) -> (id: UInt64, isNewRule: Bool) {
        nextID += 1
        let entry = Entry(id: nextID, rule: rule, state: state, handler: handler)
        if let path = rule.path { byPath[path, default: []].append(entry) } else { unrouted.append(entry) }
        let key = rule.description
        ruleCounts[key, default: (rule, 0)].count += 1
        return (nextID, ruleCounts[key]?.count == 1)
    }

    /// Removes an entry; returns its rule when no other entry uses it (RemoveMatch is due).
    mutating func remove(id: UInt64, rule: DBusMatchRule) -> DBusMatchRule? {
        if let path = rule.path {
            byPath[path]?.removeAll { $0.id == id }
            if byPath[path]?.isEmpty == true { byPath[path] = nil }
        } else {
            unrouted.removeAll { $0.id == id }
        }
        let key = rule.description
        guard let count = ruleCounts[key]?.count else { return nil }
        if count <= 1 {
            ruleCounts[key] = nil
            return rule
        }
        ruleCounts[key]?.count = count - 1
        return nil
    }

    mutating func removeAll() {
        byPath.removeAll()
        unrouted.removeAll()
        ruleCounts.removeAll()
    }

    /// How many distinct rules are registered (for tests of reference counting).
    var ruleCount: Int { ruleCounts.count }

    /// Every distinct rule, for adding them all again on a new bus connection.
    var rules: [DBusMatchRule] { ruleCounts.values.map(\.rule) }
}
