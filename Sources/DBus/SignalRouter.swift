import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

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
/// RemoveMatch. A claim (`DBusConnection+Claims.swift`) is an entry by path
/// that the bus knows nothing of; a signal it takes skips the short list.
/// Queue-confined value owned by the connection.
struct SignalRouter {
    /// A class, so that delivering a signal retains one reference instead of copying every field.
    /// The rule's names are kept as C strings too (`SignalRouter+Matching.swift`): every signal
    /// is matched against them without copying the rule or touching its Swift strings.
    ///
    /// The invariant behind `@unchecked Sendable`: immutable after `init`; the C strings are
    /// allocated there and freed only in `deinit`.
    final class Entry: @unchecked Sendable {
        let id: UInt64
        let rule: DBusMatchRule
        let state: DBusSubscriptionState
        let handler: @Sendable (DBusMessage) -> Void
        /// Set for a claim (`DBusConnection+Claims.swift`): runs instead of `handler`, and true
        /// means it took the signal, which then goes to no entry in `unrouted`.
        let claim: (@Sendable (DBusMessage) -> Bool)?
        let interface: UnsafeMutablePointer<CChar>?
        let member: UnsafeMutablePointer<CChar>?
        let path: UnsafeMutablePointer<CChar>?
        let pathNamespace: UnsafeMutablePointer<CChar>?
        let sender: UnsafeMutablePointer<CChar>?
        /// The current owner of `sender` when that is a tracked well-known name.
        let senderOwner: CurrentOwner?
        init(
            id: UInt64, rule: DBusMatchRule, state: DBusSubscriptionState, senderOwner: CurrentOwner?,
            handler: @escaping @Sendable (DBusMessage) -> Void, claim: (@Sendable (DBusMessage) -> Bool)? = nil
        ) {
            self.id = id
            self.rule = rule
            self.state = state
            self.senderOwner = senderOwner
            self.handler = handler
            self.claim = claim
            interface = rule.interface.map { strdup($0.rawValue) }
            member = rule.member.map { strdup($0.rawValue) }
            path = rule.path.map { strdup($0.rawValue) }
            pathNamespace = rule.pathNamespace.map { strdup($0.rawValue) }
            sender = rule.sender.map { strdup($0.rawValue) }
        }

        deinit {
            for string in [interface, member, path, pathNamespace, sender] { free(string) }
        }
    }

    /// The cancelled flag, shared with the subscription object without keeping it alive.
    final class DBusSubscriptionState: Sendable {
        weak let subscription: DBusSubscription?
        init(_ subscription: DBusSubscription) { self.subscription = subscription }
        var isCancelled: Bool { subscription?.isCancelled.load(ordering: .acquiring) ?? true }
    }

    private(set) var byPath: [ObjectPath: [Entry]] = [:]
    /// Bit `n % 64` set when a key of `byPath` is `n` bytes long: a signal whose path has no
    /// such length skips the dictionary (and making a Swift string of its path).
    private(set) var byPathLengths: UInt64 = 0
    private(set) var unrouted: [Entry] = []
    /// Each distinct rule (by its bus syntax) and how many entries use it.
    private var ruleCounts: [String: (rule: DBusMatchRule, count: Int)] = [:]
    private var nextID: UInt64 = 0

    /// Adds an entry; returns its id and whether the bus needs an AddMatch for its rule.
    mutating func add(
        _ rule: DBusMatchRule, state: DBusSubscriptionState, senderOwner: CurrentOwner? = nil,
        handler: @escaping @Sendable (DBusMessage) -> Void
    ) -> (id: UInt64, isNewRule: Bool) {
        nextID += 1
        let entry = Entry(id: nextID, rule: rule, state: state, senderOwner: senderOwner, handler: handler)
        if let path = rule.path {
            byPath[path, default: []].append(entry)
            byPathLengths |= Self.lengthBit(path.rawValue.utf8.count)
        } else {
            unrouted.append(entry)
        }
        let key = rule.description
        ruleCounts[key, default: (rule, 0)].count += 1
        return (nextID, ruleCounts[key]?.count == 1)
    }

    /// Removes an entry; returns its rule when no other entry uses it (RemoveMatch is due).
    mutating func remove(id: UInt64, rule: DBusMatchRule) -> DBusMatchRule? {
        if let path = rule.path {
            removeClaim(id: id, at: path)
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

    /// Adds a claim on the signals `rule` matches at its path (which it must name): an entry of
    /// `byPath` that needs no match rule on the bus and is counted in no rule's references.
    /// Returns its id.
    mutating func addClaim(
        _ rule: DBusMatchRule, at path: ObjectPath, state: DBusSubscriptionState, senderOwner: CurrentOwner?,
        handler: @escaping @Sendable (DBusMessage) -> Bool
    ) -> UInt64 {
        nextID += 1
        let entry = Entry(
            id: nextID, rule: rule, state: state, senderOwner: senderOwner, handler: { _ in }, claim: handler)
        byPath[path, default: []].append(entry)
        byPathLengths |= Self.lengthBit(path.rawValue.utf8.count)
        return nextID
    }

    /// Removes the claim (or the entry of a rule naming `path`) `id` at `path`.
    mutating func removeClaim(id: UInt64, at path: ObjectPath) {
        byPath[path]?.removeAll { $0.id == id }
        if byPath[path]?.isEmpty == true {
            byPath[path] = nil
            byPathLengths = byPath.keys.reduce(0) { $0 | Self.lengthBit($1.rawValue.utf8.count) }
        }
    }

    mutating func removeAll() {
        byPath.removeAll()
        byPathLengths = 0
        unrouted.removeAll()
        ruleCounts.removeAll()
    }

    /// At most this many paths in `byPath` are compared with a signal's path one by one, as C
    /// strings; with more, the dictionary is asked (a Swift string made and hashed).
    static let pathsComparedInPlace = 8

    /// The entries of `byPath` for a signal's path (a C string as libdbus keeps it); nil when no
    /// rule or claim names it. A few paths (the usual case: a name-owner watch, a central's
    /// subscribed characteristics) are compared in place, without making a Swift string or
    /// hashing one.
    func entries(at path: UnsafePointer<CChar>) -> [Entry]? {
        guard byPathLengths & Self.lengthBit(strlen(path)) != 0 else { return nil }
        guard byPath.count <= Self.pathsComparedInPlace else {
            return byPath[ObjectPath(trusted: String(cString: path))]
        }
        for entries in byPath.values {
            if let key = entries.first?.path, strcmp(key, path) == 0 { return entries }
        }
        return nil
    }

    /// The bit of `byPathLengths` for a path of `length` bytes.
    static func lengthBit(_ length: Int) -> UInt64 { 1 << UInt64(length & 63) }

    /// How many claims are registered (for tests).
    var claimCount: Int { byPath.values.reduce(0) { $0 + $1.count { $0.claim != nil } } }

    /// How many distinct rules are registered (for tests of reference counting).
    var ruleCount: Int { ruleCounts.count }

    /// Every distinct rule, for adding them all again on a new bus connection.
    var rules: [DBusMatchRule] { ruleCounts.values.map(\.rule) }
}
