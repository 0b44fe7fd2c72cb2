/// An error of the simulated BlueZ itself (not a D-Bus error a client sees): a code to switch on and a message.
///
/// These are thrown by ``SimulatedBlueZ`` when it cannot start, restart or
/// accept a configuration.
public struct SimulatedBlueZError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The private `dbus-daemon` could not be started or reached.
        case busUnavailable
        /// `org.bluez` could not be owned on the private bus.
        case nameUnavailable
        /// A configuration (adapter, peripheral, GATT database) is invalid: a bad address, UUID or flag.
        case invalidConfiguration
        /// An adapter with that name or address already exists, or a peripheral was added twice.
        case alreadyExists
        /// The adapter or peripheral is not part of this simulator.
        case notFound
        /// The simulator was stopped.
        case stopped
    }

    /// The category.
    public let code: Code
    /// A human-readable explanation.
    public let message: String

    /// An error with `code` and `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
