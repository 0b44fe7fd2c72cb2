internal import CDBus
import Dispatch

/// Surviving the bus: a connection opened with a ``ReconnectPolicy`` connects again when its bus
/// goes away (the daemon restarted, or our socket failed) instead of ending.
///
/// What it keeps: exported objects, signal subscriptions (their match rules are added to the new
/// bus), the names it watches, and the well-known names it owns (requested again). What it
/// cannot keep: calls under way fail with `disconnected`, messages sent while it is away are
/// dropped (`send` returns false), and its unique name changes. Every watched name is reported
/// without owner when the bus goes, as if its owner had left, and with its owner once the new
/// bus says who that is, so that a layer that follows a service through its name sees it leave
/// and come back, exactly as when the service itself restarts.
extension DBusConnection {
    /// How long a connection waits before each attempt to connect again after losing its bus.
    package struct ReconnectPolicy: Sendable, Hashable {
        /// The wait before the first attempt, the second, …; the last one repeats for ever.
        package var delays: [Duration]

        /// A policy with these waits. Traps on an empty list (a programmer error).
        package init(delays: [Duration]) {
            precondition(!delays.isEmpty, "a reconnect policy needs at least one delay")
            self.delays = delays
        }

        /// 100 ms, doubling up to 15 s, then every 15 s.
        package static let backOff = ReconnectPolicy(delays: [
            .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1.6),
            .seconds(3.2), .seconds(6.4), .seconds(12.8), .seconds(15),
        ])

        func delay(beforeAttempt attempt: Int) -> Duration { delays[min(attempt, delays.count - 1)] }
    }

    /// What a reconnecting connection reports to ``onLifecycleEvent(_:)``.
    package enum LifecycleEvent: Sendable {
        /// The bus went away: calls under way failed, sends are dropped until ``reconnected(_:)``.
        case lost(DBusError)
        /// Connected and registered again with this new unique name; subscriptions, watched and
        /// owned names restored (owners are reported as the bus answers).
        case reconnected(BusName)
    }

    /// Where the connection is in its life. Queue-confined.
    enum Lifecycle: Equatable {
        case open
        /// The bus is gone; `attempt` attempts to connect again have failed so far.
        case reconnecting(failedAttempts: Int)
        case closed

        var isReconnecting: Bool {
            if case .reconnecting = self { return true }
            return false
        }
    }

    /// Calls `handler` on `queue` each time the bus is lost and each time it is back, until the
    /// connection is closed for good. Never called for a connection without a reconnect policy.
    package func onLifecycleEvent(_ handler: @escaping @Sendable (LifecycleEvent) -> Void) {
        queue.async { if self.lifecycle != .closed { self.lifecycleHandlers.append(handler) } }
    }

    /// Whether the connection is waiting to connect again (any thread).
    package var isReconnecting: Bool { onQueue { lifecycle.isReconnecting } }

    /// Whether losing the bus leaves this connection's subscriptions in force: it has a
    /// reconnect policy and was not closed for good (any thread). A call that failed with
    /// `disconnected` then met a lost bus, which will be joined again.
    var survivesBusLoss: Bool { onQueue { reconnection != nil && lifecycle != .closed } }

    /// The bus closed the connection, or reading it failed. On `queue`.
    func connectionLost(_ reason: DBusError) {
        guard let reconnection, lifecycle == .open else { return tearDown(reason: reason) }
        guard openStorage.exchange(false, ordering: .acquiringAndReleasing) else { return }
        DBusLog.warning("lost the bus (\(reason.message)); connecting again")
        dbus_connection_close(raw)
        removeMainLoop()
        failPendingCalls(reason)
        restoringOwners = nil
        let failed = reconnectFailures
        lifecycle = .reconnecting(failedAttempts: failed)
        for name in watchedNames {
            let previous = nameOwners[name]?.owner
            nameOwners[name]?.owner = nil
            routeSynthesizedOwnerChange(of: name, from: previous, to: nil)
        }
        for handler in lifecycleHandlers { handler(.lost(reason)) }
        scheduleReconnect(after: reconnection.policy.delay(beforeAttempt: failed), failedAttempts: failed)
    }

    /// The names whose owner a subscription follows (`NameOwnerChanged` rules with `arg0`).
    private var watchedNames: [BusName] {
        router.rules.compactMap { rule in
            guard rule.sender == .bus, rule.member?.rawValue == "NameOwnerChanged", let name = rule.arg0 else {
                return nil
            }
            return try? BusName(name)
        }
    }

    private func scheduleReconnect(after delay: Duration, failedAttempts: Int) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(min(seconds, 86_400)) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(max(0, nanoseconds))) { [weak self] in
            guard let self, self.lifecycle == .reconnecting(failedAttempts: failedAttempts) else { return }
            self.reconnect(failedAttempts: failedAttempts)
        }
    }

    /// One attempt: a new socket, our main loop on it, `Hello` first of all. On `queue`.
    private func reconnect(failedAttempts: Int) {
        guard let reconnection else { return }
        let opened: RawPointer
        switch Self.openRaw(reconnection.address) {
        case .failure(let error):
            DBusLog.debug("connecting to the bus again failed: \(error.message)")
            reconnectFailures = failedAttempts + 1
            lifecycle = .reconnecting(failedAttempts: failedAttempts + 1)
            return scheduleReconnect(
                after: reconnection.policy.delay(beforeAttempt: failedAttempts + 1), failedAttempts: failedAttempts + 1)
        case .success(let raw): opened = raw
        }
        let old = raw
        sharedRaw.withLock { $0 = opened }
        raw = opened.pointer
        dbus_connection_unref(old)
        dbus_connection_set_exit_on_disconnect(raw, 0)
        installMainLoop()
        // Counted as failed until Hello is answered, so a bus that accepts and drops us backs off.
        reconnectFailures = failedAttempts + 1
        lifecycle = .open
        openStorage.store(true, ordering: .releasing)
        // Sent before anything else can be: the bus must see Hello first.
        startBusCall("Hello") { [weak self] result in
            guard let self, self.lifecycle == .open, self.raw == opened.pointer else { return }
            guard let reply = try? result.get().arguments(), let name = reply.first?.stringValue,
                let unique = try? BusName(name)
            else {
                return self.connectionLost(DBusError(.failed, "the bus did not answer Hello"))
            }
            self.registered(as: unique)
        }
    }

    /// Registered again: the bus learns our rules and names, and we learn who owns what we watch.
    private func registered(as unique: BusName) {
        setUniqueName(unique)
        reconnectFailures = 0
        DBusLog.warning("connected to the bus again as \(unique.rawValue)")
        for rule in router.rules {
            // No reply wanted: the bus handles a connection's messages in order, so each rule is
            // in force before the name lookups below are answered.
            guard
                let message = try? DBusMessage.methodCall(
                    destination: .bus, path: Self.busPath, interface: .bus, member: "AddMatch",
                    arguments: [.string(rule.description)])
            else { continue }
            dbus_message_set_no_reply(message.raw, 1)
            sendOnQueue(message)
        }
        for (name, flags) in ownedNames {
            startBusCall("RequestName", [.string(name.rawValue), .uint32(flags.rawValue)]) { result in
                if case .failure(let error) = result {
                    DBusLog.warning("cannot own \(name.rawValue) again: \(error.message)")
                }
            }
        }
        let names = watchedNames
        restoringOwners = Set(names)
        for name in names {
            startBusCall("GetNameOwner", [.string(name.rawValue)]) { [weak self] result in
                guard let self, self.restoringOwners?.remove(name) != nil else { return }
                if self.restoringOwners?.isEmpty == true { self.restoringOwners = nil }
                guard let owner = (try? result.get().arguments())?.first?.stringValue, !owner.isEmpty else {
                    return
                }
                self.routeSynthesizedOwnerChange(of: name, from: nil, to: BusName(trusted: owner))
            }
        }
        for handler in lifecycleHandlers { handler(.reconnected(unique)) }
    }

    /// A real `NameOwnerChanged` came in while we were asking for that name's owner: it is newer
    /// than our question's answer could be, so the answer is not reported. On `queue`.
    ///
    /// Only the bus driver's: another process's forged one must not make us drop the answer
    /// (the watched service would then never be seen back).
    func noteOwnerChangeWhileRestoring(_ rawMessage: OpaquePointer) {
        guard restoringOwners != nil,
            dbus_message_is_signal(rawMessage, "org.freedesktop.DBus", "NameOwnerChanged") != 0,
            Self.isFromBusDriver(rawMessage),
            let name = DBusMessage(retaining: rawMessage).firstStringArgument
        else { return }
        restoringOwners?.remove(BusName(trusted: name))
        if restoringOwners?.isEmpty == true { restoringOwners = nil }
    }

    /// Delivers a `NameOwnerChanged` of our own making to the subscriptions, as from the bus.
    private func routeSynthesizedOwnerChange(of name: BusName, from old: BusName?, to new: BusName?) {
        guard
            let message = try? DBusMessage.signal(
                path: Self.busPath, interface: .bus, member: "NameOwnerChanged",
                arguments: [.string(name.rawValue), .string(old?.rawValue ?? ""), .string(new?.rawValue ?? "")])
        else { return }
        dbus_message_set_sender(message.raw, BusName.bus.rawValue)
        routeSignal(message)
    }

    /// A call to the bus driver, answered on `queue`.
    private func startBusCall(
        _ member: MemberName, _ arguments: [DBusValue] = [],
        completion: @escaping (Result<DBusMessage, DBusError>) -> Void
    ) {
        do throws(DBusError) {
            let message = try DBusMessage.methodCall(
                destination: .bus, path: Self.busPath, interface: .bus, member: member, arguments: arguments)
            startCall(message.raw, timeout: Self.defaultCallTimeout, PendingCall(completion: completion))
        } catch {
            completion(.failure(error))
        }
    }

    /// `address` without its `guid` keys: a restarted bus has a new GUID, and libdbus refuses a
    /// server whose GUID differs from the one the address names.
    package static func addressForReconnecting(_ address: String) -> String {
        address.split(separator: ";", omittingEmptySubsequences: false).map { entry -> String in
            guard let colon = entry.firstIndex(of: ":") else { return String(entry) }
            let keys = entry[entry.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false)
            let kept = keys.filter { !$0.hasPrefix("guid=") }
            return String(entry[...colon]) + kept.joined(separator: ",")
        }.joined(separator: ";")
    }
}
