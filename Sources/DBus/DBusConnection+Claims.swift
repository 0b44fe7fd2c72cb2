import Dispatch

extension DBusConnection {
    /// Claims the signals at `rule.path` that `rule` matches: `handler` sees each of them
    /// before the subscriptions whose rules name no path, and when it returns true (it took the
    /// signal) those never see it. For a hot signal that a broad subscription already brings
    /// (a path namespace): one object's signals go straight to a handler that knows their
    /// destination, the broad one keeps the rest.
    ///
    /// Immediate, on `queue` only: no match rule is added to the bus (the broad subscription's
    /// rule makes the bus send these signals already), so nothing is awaited. A well-known
    /// `rule.sender` matches its current owner only while another subscription of this
    /// connection tracks that name (the broad one does). `handler` runs on `queue`, never after
    /// the claim is cancelled or released.
    /// - Throws: ``DBusError`` `invalidArgs` when `rule` names no path; `disconnected` when the
    ///   connection is closed.
    package func claimSignals(_ rule: DBusMatchRule, handler: @escaping @Sendable (DBusMessage) -> Bool)
        throws(DBusError) -> DBusSubscription
    {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let path = rule.path else { throw DBusError(.invalidArgs, "a claim needs a rule that names a path") }
        guard isOpen || lifecycle.isReconnecting else { throw DBusError(.disconnected, "the connection is closed") }
        let holder = SubscriptionHolder()
        let claim = DBusSubscription { [weak self, holder] in
            guard let self else { return }
            self.queue.async {
                guard let id = holder.id else { return }
                self.router.removeClaim(id: id, at: path)
            }
        }
        let owner = rule.sender.flatMap { nameOwners[$0]?.current }
        holder.id = router.addClaim(rule, at: path, state: .init(claim), senderOwner: owner, handler: handler)
        return claim
    }

    /// Number of claims this connection holds (for tests; off the queue).
    package var claimCount: Int { onQueue { router.claimCount } }
}
