import Foundation

/// A bluetoothd a conformance body runs against: the real one in the guest, or the simulator
/// playing one release.
///
/// Bodies talk to it over D-Bus alone, at ``busAddress``, as any program would; they never reach
/// into the simulator, so the same body judges both.
public struct BluetoothdUnderTest: Sendable, CustomStringConvertible {
    /// A bluetoothd release, `major.minor` (5.66, 5.82, 5.87).
    public struct Version: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The major number (5).
        public let major: Int
        /// The minor number (66).
        public let minor: Int

        /// The release `major.minor`.
        public init(_ major: Int, _ minor: Int) {
            self.major = major
            self.minor = minor
        }

        /// Parses `5.66` (or bluetoothd's `--version` output, `5.66`); nil for anything else.
        public init?(parsing text: String) {
            let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".")
            guard parts.count >= 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
            self.init(major, minor)
        }

        /// Orders releases by major, then minor number.
        public static func < (lhs: Version, rhs: Version) -> Bool {
            (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
        }

        /// `5.66`.
        public var description: String { "\(major).\(minor)" }
    }

    /// What the harness calls it in reports ("simulator 5.82", "bluetoothd 5.66").
    public let name: String
    /// The release it is, or plays.
    public let version: Version
    /// The bus bluetoothd owns `org.bluez` on.
    public let busAddress: String
    /// The adapter bodies act on (`hci0`); the peer uses another one.
    public let adapter: String
    /// bluetoothd's default-agent log lines so far ("Default agent set to :1.5 /agent", "Default
    /// agent cleared"), oldest first; nil where the harness cannot read them (the simulator, for
    /// now). Bodies take a mark (the count) and look at later lines only.
    public let defaultAgentLog: (@Sendable () async throws -> [String])?

    /// A bluetoothd under test.
    public init(
        name: String, version: Version, busAddress: String, adapter: String = "hci0",
        defaultAgentLog: (@Sendable () async throws -> [String])? = nil
    ) {
        self.name = name
        self.version = version
        self.busAddress = busAddress
        self.adapter = adapter
        self.defaultAgentLog = defaultAgentLog
    }

    /// The adapter's object path, `/org/bluez/hci0`.
    public var adapterPath: String { "/org/bluez/\(adapter)" }

    /// The object path of the device with `address` on the adapter under test.
    public func devicePath(_ address: String) -> String {
        adapterPath + "/dev_" + address.uppercased().replacingOccurrences(of: ":", with: "_")
    }

    /// `name (version)`.
    public var description: String { "\(name) \(version)" }
}
