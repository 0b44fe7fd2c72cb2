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

    /// Whether `message` (a signal) satisfies the rule; `senderOwner` gives the current owner of
    /// `sender` when that is a well-known name (asked only when everything else matched).
    ///
    /// Runs for every rule for every signal: it compares the message's header fields where libdbus
    /// keeps them, without making Swift strings of them.
    func matches(_ message: DBusMessage, senderOwner: (BusName) -> BusName?) -> Bool {
        let raw = message.raw
        // withCString: passing a String as a C string argument would copy it into a new array.
        if let interface, interface.rawValue.withCString({ dbus_message_has_interface(raw, $0) }) == 0 { return false }
        if let member, member.rawValue.withCString({ dbus_message_has_member(raw, $0) }) == 0 { return false }
        if let path, path.rawValue.withCString({ dbus_message_has_path(raw, $0) }) == 0 { return false }
        if let pathNamespace {
            guard let messagePath = dbus_message_get_path(raw), Self.isPath(messagePath, in: pathNamespace) else {
                return false
            }
        }
        if let sender {
            let matchesName = sender.rawValue.withCString { dbus_message_has_sender(raw, $0) } != 0
            guard
                matchesName
                    || senderOwner(sender).map({ owner in
                        owner.rawValue.withCString { dbus_message_has_sender(raw, $0) } != 0
                    }) == true
            else { return false }
        }
        if let arg0, message.firstStringArgument != arg0 { return false }
        return true
    }

    /// Whether the C string `path` is `namespace` or below it (`path_namespace`'s meaning).
    static func isPath(_ path: UnsafePointer<CChar>, in namespace: ObjectPath) -> Bool {
        var namespace = namespace.rawValue
        return namespace.withUTF8 { prefix in
            if prefix.count == 1 { return true }  // "/": every path
            for index in 0..<prefix.count where UInt8(bitPattern: path[index]) != prefix[index] { return false }
            let next = UInt8(bitPattern: path[prefix.count])
            return next == 0 || next == UInt8(ascii: "/")
        }
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard contains(target) else { return self }
        return split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
