internal import CDBus

extension SignalRouter.Entry {
    /// Whether `message` (a signal) satisfies the entry's rule, compared with the C strings kept
    /// for it: each name the rule gives equals the message's (a well-known sender also matches
    /// its current owner, `senderOwner`), the path lies in `pathNamespace`, the first argument
    /// is `arg0`. `messagePath` is the message's path as libdbus keeps it; `pathMatched` says
    /// it is known to equal the rule's path already (the entry was found by it).
    ///
    /// Runs for every entry for every signal: no Swift string is made or hashed.
    func matches(_ message: DBusMessage, messagePath: UnsafePointer<CChar>?, pathMatched: Bool = false) -> Bool {
        let raw = message.raw
        if let interface, dbus_message_has_interface(raw, interface) == 0 { return false }
        if let member, dbus_message_has_member(raw, member) == 0 { return false }
        if !pathMatched, let path, dbus_message_has_path(raw, path) == 0 { return false }
        if let pathNamespace {
            guard let messagePath, Self.isPath(messagePath, in: pathNamespace) else { return false }
        }
        if let sender, dbus_message_has_sender(raw, sender) == 0 {
            guard let owner = senderOwner?.cName, dbus_message_has_sender(raw, owner) != 0 else { return false }
        }
        if let arg0 = rule.arg0, message.firstStringArgument != arg0 { return false }
        return true
    }

    /// Whether the C string `path` is `namespace` or below it (`path_namespace`'s meaning).
    static func isPath(_ path: UnsafePointer<CChar>, in namespace: UnsafePointer<CChar>) -> Bool {
        let slash = CChar(bitPattern: UInt8(ascii: "/"))
        if namespace[0] == slash && namespace[1] == 0 { return true }  // "/": every path
        var index = 0
        while namespace[index] != 0 {
            guard path[index] == namespace[index] else { return false }
            index += 1
        }
        return path[index] == 0 || path[index] == slash
    }
}
