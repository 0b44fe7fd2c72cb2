/// An error of the D-Bus layer: a code to switch on, the D-Bus error name and the message.
///
/// Error replies from peers keep their name and message; errors made locally
/// (validation, timeouts, a closed connection) use the standard
/// `org.freedesktop.DBus.Error.*` names so that they can be sent as replies too.
package struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in the categories a caller acts on.
    package enum Code: Sendable, Hashable {
        case failed
        case noReply
        case timeout
        case unknownObject
        case unknownMethod
        case unknownInterface
        case unknownProperty
        case propertyReadOnly
        case invalidArgs
        case invalidSignature
        case accessDenied
        case serviceUnknown
        case nameHasNoOwner
        case disconnected
        case cancelled
        case noMemory
        /// Any error name without a code of its own (for example `org.bluez.Error.Failed`).
        case other(String)
    }

    package var code: Code
    /// The D-Bus error name, such as `org.freedesktop.DBus.Error.InvalidArgs`.
    package var name: String
    package var message: String

    package init(name: String, message: String) {
        self.name = name
        self.message = message
        self.code = Self.code(forName: name)
    }

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        self.name = Self.name(for: code)
    }

    package var description: String { message.isEmpty ? name : "\(name): \(message)" }

    static let prefix = "org.freedesktop.DBus.Error."

    private static let table: [(Code, String)] = [
        (.failed, "Failed"), (.noReply, "NoReply"), (.timeout, "Timeout"),
        (.unknownObject, "UnknownObject"), (.unknownMethod, "UnknownMethod"),
        (.unknownInterface, "UnknownInterface"), (.unknownProperty, "UnknownProperty"),
        (.propertyReadOnly, "PropertyReadOnly"), (.invalidArgs, "InvalidArgs"),
        (.invalidSignature, "InvalidSignature"), (.accessDenied, "AccessDenied"),
        (.serviceUnknown, "ServiceUnknown"), (.nameHasNoOwner, "NameHasNoOwner"),
        (.disconnected, "Disconnected"), (.noMemory, "NoMemory"),
    ]

    static func code(forName name: String) -> Code {
        guard name.hasPrefix(prefix) else { return .other(name) }
        let short = name.dropFirst(prefix.count)
        if short == "TimedOut" { return .timeout }
        if short == "Cancelled" { return .cancelled }
        return table.first { $0.1 == short }?.0 ?? .other(name)
    }

    static func name(for code: Code) -> String {
        switch code {
        case .other(let name): return name
        case .cancelled: return prefix + "Cancelled"
        default: return prefix + (table.first { $0.0 == code }?.1 ?? "Failed")
        }
    }
}
