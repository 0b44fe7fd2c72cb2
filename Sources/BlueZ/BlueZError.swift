package import DBus

/// An error of bluetoothd, or of reaching it: the one conversion of the D-Bus layer's errors
/// for the layer above, which acts on ``code`` and never on an error name.
///
/// The codes mirror bluetoothd's `org.bluez.Error.*` names (doc/org.bluez.*.rst; bluer's
/// `ErrorKind` is the model), plus what the bus itself can answer. The D-Bus error stays in
/// ``underlying``; ``name`` is the D-Bus error name, for messages and for replies we send.
package struct BlueZError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in the categories a caller acts on.
    package enum Code: Sendable, Hashable, CaseIterable {
        // bluetoothd's own errors.
        case alreadyConnected, alreadyExists, authenticationCanceled, authenticationFailed
        case authenticationRejected, authenticationTimeout, canceled, connectionAttemptFailed
        case doesNotExist, failed, improperlyConfigured, inProgress, invalidArguments, invalidOffset
        case invalidValueLength, notAuthorized, notAvailable, notConnected, notPermitted, notReady
        case notSupported, rejected
        /// The bus policy does not let this process talk to bluetoothd (or do this).
        case accessDenied
        /// Our connection to the bus is gone (it is being connected again, or was closed).
        case disconnected
        /// No answer in time.
        case timeout
        /// bluetoothd left the bus (or restarted) without answering.
        case noReply
        /// bluetoothd is not on the bus (not running, or restarting).
        case serviceAbsent
        /// The object is gone: a device bluetoothd forgot, an attribute of a changed database.
        case unknownObject
        /// The task that waited was cancelled.
        case cancelled
        /// bluetoothd answered with something we cannot read.
        case invalidReply
        /// Any other error; see ``name``.
        case other
    }

    package var code: Code
    /// The D-Bus error name, such as `org.bluez.Error.NotReady`.
    package var name: String
    package var message: String
    /// The D-Bus error this was converted from; nil for one made here.
    package var underlying: DBusError?

    /// The conversion of a D-Bus error.
    package init(_ error: DBusError) {
        self.name = error.name
        self.message = error.message
        self.underlying = error
        self.code = Self.code(for: error)
    }

    /// An error as bluetoothd's name and message read it (tests, and replies to convert).
    package init(name: String, message: String) {
        self.init(DBusError(name: name, message: message))
    }

    /// An error made here, with the name bluetoothd gives that code.
    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        self.name = Self.name(for: code)
        self.underlying = nil
    }

    package var description: String { message.isEmpty ? name : "\(name): \(message)" }

    /// The D-Bus error to reply with (our exported objects answering bluetoothd).
    package var dbusError: DBusError { underlying ?? DBusError(name: name, message: message) }

    static let prefix = "org.bluez.Error."

    /// bluetoothd's names (without the prefix) for its codes.
    private static let names: [Code: String] = [
        .alreadyConnected: "AlreadyConnected", .alreadyExists: "AlreadyExists",
        .authenticationCanceled: "AuthenticationCanceled", .authenticationFailed: "AuthenticationFailed",
        .authenticationRejected: "AuthenticationRejected", .authenticationTimeout: "AuthenticationTimeout",
        .canceled: "Canceled", .connectionAttemptFailed: "ConnectionAttemptFailed", .doesNotExist: "DoesNotExist",
        .failed: "Failed", .improperlyConfigured: "ImproperlyConfigured", .inProgress: "InProgress",
        .invalidArguments: "InvalidArguments", .invalidOffset: "InvalidOffset",
        .invalidValueLength: "InvalidValueLength", .notAuthorized: "NotAuthorized", .notAvailable: "NotAvailable",
        .notConnected: "NotConnected", .notPermitted: "NotPermitted", .notReady: "NotReady",
        .notSupported: "NotSupported", .rejected: "Rejected",
    ]
    private static let codes = Dictionary(uniqueKeysWithValues: names.map { ($0.value, $0.key) })

    private static func code(for error: DBusError) -> Code {
        if error.name.hasPrefix(prefix) { return codes[String(error.name.dropFirst(prefix.count))] ?? .other }
        switch error.code {
        case .accessDenied: return .accessDenied
        case .disconnected: return .disconnected
        case .timeout: return .timeout
        case .noReply: return .noReply
        case .serviceUnknown, .nameHasNoOwner: return .serviceAbsent
        case .unknownObject, .unknownMethod, .unknownInterface: return .unknownObject
        case .cancelled: return .cancelled
        case .invalidSignature: return .invalidReply
        case .invalidArgs: return .invalidArguments
        case .failed: return .failed
        default: return .other
        }
    }

    private static func name(for code: Code) -> String {
        if let name = names[code] { return prefix + name }
        switch code {
        case .accessDenied: return DBusError(.accessDenied, "").name
        case .disconnected: return DBusError(.disconnected, "").name
        case .timeout: return DBusError(.timeout, "").name
        case .noReply: return DBusError(.noReply, "").name
        case .serviceAbsent: return DBusError(.serviceUnknown, "").name
        case .unknownObject: return DBusError(.unknownObject, "").name
        case .cancelled: return DBusError(.cancelled, "").name
        case .invalidReply: return DBusError(.invalidSignature, "").name
        default: return prefix + "Failed"
        }
    }
}

extension BlueZError {
    /// Runs a D-Bus exchange, converting its error: the boundary of this layer.
    static func converting<T>(_ body: () async throws(DBusError) -> T) async throws(BlueZError) -> T {
        do throws(DBusError) { return try await body() } catch { throw BlueZError(error) }
    }
}
