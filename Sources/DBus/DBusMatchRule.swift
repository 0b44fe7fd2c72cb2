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

    /// Whether `message` (a signal) satisfies the rule; `senderOwner` is the
    /// current owner of `sender` when that is a well-known name.
    func matches(_ message: DBusMessage, senderOwner: BusName?) -> Bool {
        let raw = message.raw
        // withCString: passing a String as a C string argument would copy it into a new array.
        if let interface, interface.rawValue.withCString({ dbus_message_has_interface(raw, $0) }) == 0 { return false }
        if let member, member.rawValue.withCString({ dbus_message_has_member(raw, $0) }) == 0 { return false }
        if let path, path.rawValue.withCString({ dbus_message_has_path(raw, $0) }) == 0 { return false }
        if let pathNamespace {
            guard let messagePath = message.path, messagePath.isDescendant(of: pathNamespace) else { return false }
        }
        if let sender {
            let matchesName = dbus_message_has_sender(raw, sender.rawValue) != 0
            let matchesOwner = senderOwner.map { dbus_message_has_sender(raw, $0.rawValue) != 0 } ?? false
            guard matchesName || matchesOwner else { return false }
        }
        if let arg0, message.firstStringArgument != arg0 { return false }
        return true
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard contains(target) else { return self }
        return split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
