internal import CDBus

/// A match rule for signals, as the bus understands it (`type='signal',sender=…`).
///
/// The same rule filters locally: the bus delivers to a connection the union
/// of all its rules, plus unicast signals nobody asked for, so every handler
/// checks its own rule again.
package struct DBusMatchRule: Hashable, Sendable, CustomStringConvertible {
    /// A unique or well-known name; a well-known name matches its current owner.
    package var sender: BusName?
    package var path: ObjectPath?
    /// Matches `pathNamespace` itself and every path below it.
    package var pathNamespace: ObjectPath?
    package var interface: InterfaceName?
    package var member: MemberName?
    /// The first argument, when it is a string.
    package var arg0: String?

    package init(
        sender: BusName? = nil, path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil,
        interface: InterfaceName? = nil, member: MemberName? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arg0 = arg0
    }

    /// The rule in the bus's syntax, each value quoted (a quote inside a value is written `'\''`).
    package var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            parts.append("\(key)='\(value.replacingOccurrences(of: "'", with: "'\\''"))'")
        }
        add("sender", sender?.rawValue)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("interface", interface?.rawValue)
        add("member", member?.rawValue)
        add("arg0", arg0)
        return parts.joined(separator: ",")
    }

    /// Whether `message` (a signal) satisfies the rule, as the connection's router decides it
    /// (`SignalRouter+Matching.swift`); `senderOwner` gives the current owner of `sender` when
    /// that is a well-known name. For tests and the fuzzer: the router keeps an entry per rule.
    func matches(_ message: DBusMessage, senderOwner: (BusName) -> BusName?) -> Bool {
        let owner = CurrentOwner()
        owner.name = sender.flatMap(senderOwner)
        let subscription = DBusSubscription {}
        let entry = SignalRouter.Entry(
            id: 0, rule: self, state: .init(subscription), senderOwner: owner, handler: { _ in })
        return entry.matches(message, messagePath: dbus_message_get_path(message.raw))
    }

    /// Whether the C string `path` is `namespace` or below it (`path_namespace`'s meaning).
    static func isPath(_ path: UnsafePointer<CChar>, in namespace: ObjectPath) -> Bool {
        namespace.rawValue.withCString { SignalRouter.Entry.isPath(path, in: $0) }
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard contains(target) else { return self }
        return split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
