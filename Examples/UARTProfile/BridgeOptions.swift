import HeartRateProfile

/// What `uart-bridge` was asked to do: the role first, then its options.
///
///     uart-bridge peripheral [--adapter hciN] [--name NAME] [--json]
///     uart-bridge central [--adapter hciN] [--name NAME] [--mode gatt|l2cap|both] [--bytes N] [--chunk N]
///                         [--timeout S] [--json]
public struct BridgeOptions: Sendable, Hashable {
    /// Which side of the bridge to run.
    public enum Role: String, Sendable, Hashable {
        /// Publishes the Nordic UART Service and an L2CAP channel, and echoes what it receives.
        case peripheral
        /// Finds the peripheral, sends it the test pattern, checks the echo and measures.
        case central
    }

    /// How the central moves its bytes.
    public enum Mode: String, Sendable, Hashable {
        /// Writes without response to RX; the echo comes back as notifications of TX.
        case gatt
        /// An LE credit-based L2CAP channel to the PSM the peripheral serves.
        case l2cap
    }

    /// The central's transports, in turn on one connection (`--mode both`: GATT, then L2CAP).
    public var modes = [Mode.gatt]

    /// The two command lines.
    public static let usage = """
        usage: uart-bridge peripheral [--adapter hciN] [--name NAME] [--json]
               uart-bridge central [--adapter hciN] [--name NAME] [--mode gatt|l2cap|both] [--bytes N] [--chunk N]
                                   [--timeout S] [--json]
        """

    /// The side to run.
    public var role: Role
    /// The adapter (`hci0`, or its address); nil for bluetoothd's first.
    public var adapter: String?
    /// The peripheral advertises this name; the central takes only a peripheral of this name
    /// (when given: nil takes the first one with the service).
    public var name: String?
    /// How many bytes the central sends (and expects back).
    public var bytes = 65_536
    /// GATT mode: the longest write, in bytes (frame header included); nil for what
    /// `maximumWriteValueLength(for: .withoutResponse)` allows.
    public var chunk: Int?
    /// The central gives up when the echo makes no progress for this many seconds.
    public var timeoutSeconds = 30
    /// JSON lines instead of human ones.
    public var json = false
    /// `--help` was asked for.
    public var help = false

    /// Parses the arguments (without the program name).
    /// - Throws: ``BridgeUsageError`` for a missing or unknown role, an unknown option, a missing
    ///   or malformed value, or an option of the other role.
    public init(parsing arguments: [String]) throws(BridgeUsageError) {
        guard let first = arguments.first else { throw BridgeUsageError("name a role: peripheral or central") }
        if first == "--help" || first == "-h" {
            role = .central
            help = true
            return
        }
        guard let role = Role(rawValue: first) else {
            throw BridgeUsageError("unknown role \(first): peripheral or central")
        }
        self.role = role
        let valued: Set<String> =
            role == .central
            ? ["--adapter", "--name", "--mode", "--bytes", "--chunk", "--timeout"] : ["--adapter", "--name"]
        let options: CommandLineOptions
        do {
            options = try CommandLineOptions(Array(arguments.dropFirst()), valued: valued, flags: ["--json", "--help"])
            bytes = try options.positiveInteger("--bytes", default: bytes)
            timeoutSeconds = try options.positiveInteger("--timeout", default: timeoutSeconds)
            if options.value("--chunk") != nil {
                let chunk = try options.positiveInteger("--chunk", default: 0)
                guard chunk > UARTFrame.headerLength else {
                    throw BridgeUsageError("--chunk needs room for a frame: more than \(UARTFrame.headerLength) bytes")
                }
                self.chunk = chunk
            }
        } catch {
            throw BridgeUsageError("\(error)")
        }
        adapter = options.value("--adapter")
        name = options.value("--name")
        json = options.flag("--json")
        help = options.flag("--help")
        if let text = options.value("--mode") {
            if text == "both" {
                modes = [.gatt, .l2cap]
            } else if let mode = Mode(rawValue: text) {
                modes = [mode]
            } else {
                throw BridgeUsageError("--mode is gatt, l2cap or both, not \(text)")
            }
        }
    }
}

/// A mistake on `uart-bridge`'s command line.
public struct BridgeUsageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public let description: String

    init(_ description: String) { self.description = description }
}
