internal import CDBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

extension DBusConnection {
    /// Subscribes `handler` to the signals that match `rule`.
    ///
    /// Adds the rule to the bus (reference-counted: one AddMatch per distinct
    /// rule) and returns once the bus confirmed it, so no matching signal sent
    /// after this returns is missed. A rule whose sender is a well-known name
    /// matches that name's current owner, tracked here. `handler` runs on
    /// `queue`, in the order the signals arrived, and never after the
    /// subscription is cancelled or released.
    package func subscribe(_ rule: DBusMatchRule, handler: @escaping @Sendable (DBusMessage) -> Void)
        async throws(DBusError) -> DBusSubscription
    {
        var nameTracking: DBusSubscription? = nil
        if let sender = rule.sender, !sender.isUnique, sender != .bus {
            nameTracking = try await trackOwner(of: sender)
        }
        let holder = SubscriptionHolder()
        let subscription = DBusSubscription { [weak self, holder, nameTracking] in
            guard let self else { return }
            self.queue.async {
                guard let id = holder.id else { return }
                if let unused = self.router.remove(id: id, rule: rule) { self.removeMatch(unused) }
                nameTracking?.cancel()
            }
        }
        let isNewRule: Bool = try onQueueThrowing { () throws(DBusError) -> Bool in
            // While reconnecting the rule is kept, and added to the new bus with the others.
            guard isOpen || lifecycle.isReconnecting else {
                throw DBusError(.disconnected, "the connection is closed")
            }
            // The rule's well-known sender is tracked by now (`nameTracking`): its entry reads the owner.
            let owner = rule.sender.flatMap { nameOwners[$0]?.current }
            let added = router.add(rule, state: .init(subscription), senderOwner: owner, handler: handler)
            holder.id = added.id
            return added.isNewRule
        }
        if isBus && isNewRule {
            do {
                _ = try await call(
                    destination: .bus, path: Self.busPath, interface: .bus, member: "AddMatch",
                    arguments: [.string(rule.description)])
            } catch  where error.code == .disconnected && survivesBusLoss {
                // The rule is added to the new bus once connected again (or was, if that was quick).
            } catch {
                subscription.cancel()
                throw error
            }
        }
        return subscription
    }

    /// Subscribes to `NameOwnerChanged` for `name` and reports its current
    /// owner first (nil when it has none), then every change, on `queue`.
    ///
    /// On a connection with a reconnect policy, losing the bus before the owner is known is no
    /// error: the watch reports no owner, then the owner the new bus names.
    ///
    /// Only the bus driver's word counts: the rule names it as sender, and each signal is
    /// checked again, since any other process on the bus may send a `NameOwnerChanged` of its
    /// own making straight to us (a unicast signal passes no match rule of ours).
    package func watchNameOwner(_ name: BusName, handler: @escaping @Sendable (BusName?) -> Void)
        async throws(DBusError) -> DBusSubscription
    {
        let rule = DBusMatchRule(
            sender: .bus, path: Self.busPath, interface: .bus, member: "NameOwnerChanged", arg0: name.rawValue)
        let changes = ChangeCounter()
        let subscription = try await subscribe(rule) { message in
            guard Self.isFromBusDriver(message.raw), let args = try? message.arguments(), args.count == 3,
                let newOwner = args[2].stringValue
            else {
                return
            }
            changes.count += 1
            handler(newOwner.isEmpty ? nil : BusName(trusted: newOwner))
        }
        let owner: BusName?
        do {
            owner = try await nameOwner(of: name)
        } catch  where error.code == .disconnected && survivesBusLoss {
            // The bus went before it answered (at start, just after Hello, too): the owner is
            // unknown, as for every watched name while the bus is away, and the new bus is
            // asked once connected again (`registered(as:)`). Not an error: a reconnecting
            // connection's subscriptions live on.
            queue.async {
                if !subscription.isCancelled.load(ordering: .acquiring), changes.count == 0 { handler(nil) }
            }
            return subscription
        }
        queue.async {
            // A change reported since subscribing is at least as new as this
            // answer: reporting the answer after it would undo it.
            if !subscription.isCancelled.load(ordering: .acquiring), changes.count == 0 { handler(owner) }
        }
        return subscription
    }

    /// Counts `NameOwnerChanged` reports; touched only on the queue.
    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }

    /// The unique name that owns `name` now, or nil (`GetNameOwner`).
    package func nameOwner(of name: BusName) async throws(DBusError) -> BusName? {
        // A unique name owns itself only while its connection is on the bus: ask.
        if name == .bus { return name }
        do {
            let reply = try await call(
                destination: .bus, path: Self.busPath, interface: .bus, member: "GetNameOwner",
                arguments: [.string(name.rawValue)])
            return reply.first?.stringValue.map(BusName.init(trusted:))
        } catch  where error.code == .nameHasNoOwner {
            return nil
        }
    }

    static let busPath = ObjectPath(trusted: "/org/freedesktop/DBus")

    /// Whether the bus driver sent `rawMessage` (the daemon stamps every message with its
    /// sender's name; no other connection may own `org.freedesktop.DBus`).
    static func isFromBusDriver(_ rawMessage: OpaquePointer) -> Bool {
        dbus_message_has_sender(rawMessage, "org.freedesktop.DBus") != 0
    }

    final class SubscriptionHolder: @unchecked Sendable {
        /// Set once on the queue before the subscription can be cancelled there.
        var id: UInt64?
    }

    /// A well-known name whose owner routing needs. Queue-confined.
    struct TrackedName {
        /// The owner, shared with the router's entries whose rules name this sender.
        let current = CurrentOwner()
        var owner: BusName? {
            get { current.name }
            nonmutating set { current.name = newValue }
        }
        var users: Int
        /// False until the first user's watch has looked the owner up; later users wait for that.
        var known = false
        var waiters: [CheckedContinuation<Void, Never>] = []

        /// Marks the owner as looked up and returns the users to wake.
        mutating func becomeKnown() -> [CheckedContinuation<Void, Never>] {
            defer { waiters = [] }
            known = true
            return waiters
        }
    }

    /// Keeps `nameOwners[name]` current while the returned subscription lives.
    func trackOwner(of name: BusName) async throws(DBusError) -> DBusSubscription {
        let first: Bool = onQueue {
            if nameOwners[name] != nil {
                nameOwners[name]!.users += 1
                return false
            }
            nameOwners[name] = TrackedName(users: 1)
            return true
        }
        let release = DBusSubscription { [weak self] in
            guard let self else { return }
            self.queue.async {
                guard var tracked = self.nameOwners[name] else { return }
                tracked.users -= 1
                self.nameOwners[name] = tracked.users > 0 ? tracked : nil
                if tracked.users == 0 { self.ownerWatches[name] = nil }
            }
        }
        if first {
            do {
                let watch = try await watchNameOwner(name) { [weak self] owner in
                    self?.nameOwners[name]?.owner = owner
                }
                // The watch's first report (the current owner) is queued before this runs.
                onQueue {
                    ownerWatches[name] = watch
                    for waiter in nameOwners[name]?.becomeKnown() ?? [] { waiter.resume() }
                }
            } catch {
                onQueue {
                    for waiter in nameOwners[name]?.becomeKnown() ?? [] { waiter.resume() }
                }
                throw error
            }
        } else {
            // Until the first user's lookup is back the owner is unknown, and a
            // subscription returned now would drop the owner's next signals.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async {
                    if self.nameOwners[name]?.known == false {
                        self.nameOwners[name]!.waiters.append(continuation)
                    } else {
                        continuation.resume()
                    }
                }
            }
        }
        return release
    }

    /// Delivers a signal to every live subscription whose rule it matches; one that a claim took
    /// (`DBusConnection+Claims.swift`) to none whose rule names no path. On `queue`.
    func routeSignal(_ message: DBusMessage) {
        let path = dbus_message_get_path(message.raw)
        if let path, let entries = router.entries(at: path), deliver(message, path: path, to: entries, byPath: true) {
            return
        }
        _ = deliver(message, path: path, to: router.unrouted, byPath: false)
    }

    /// Runs the handlers of `entries` that match; true when a claim among them took the signal.
    /// `byPath`: the entries were found by the signal's path, which their rules name.
    private func deliver(
        _ message: DBusMessage, path: UnsafePointer<CChar>?, to entries: [SignalRouter.Entry], byPath: Bool
    ) -> Bool {
        var taken = false
        for entry in entries {
            guard entry.matches(message, messagePath: path, pathMatched: byPath), !entry.state.isCancelled else {
                continue
            }
            if let claim = entry.claim {
                if claim(message) { taken = true }
            } else {
                entry.handler(message)
            }
        }
        return taken
    }

    private func removeMatch(_ rule: DBusMatchRule) {
        guard isBus, isOpen,
            let message = try? DBusMessage.methodCall(
                destination: .bus, path: Self.busPath, interface: .bus, member: "RemoveMatch",
                arguments: [.string(rule.description)])
        else { return }
        dbus_message_set_no_reply(message.raw, 1)
        sendOnQueue(message)
    }

    /// Number of distinct match rules this connection holds (for tests).
    package var matchRuleCount: Int { onQueue { router.ruleCount } }
}
