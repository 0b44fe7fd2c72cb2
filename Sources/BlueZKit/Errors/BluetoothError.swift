/// An error of a Bluetooth operation that is not an ATT error, as Core
/// Bluetooth's `CBError`.
///
/// The ``code`` has Core Bluetooth's `CBError.Code` cases and raw values, and
/// a few Linux ones from 100 up. ``message`` explains the failure in a
/// sentence; ``underlying`` keeps the error it was made from (a D-Bus error
/// from bluetoothd, a file-system error of the restoration store, …).
///
/// Two errors are equal when their codes and messages are; ``underlying`` is
/// not compared. As with Core Bluetooth, you can match codes directly:
///
/// ```swift
/// catch BluetoothError.connectionTimeout { … }
/// if let error = error as? BluetoothError, error.code == .peripheralDisconnected { … }
/// ```
public struct BluetoothError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Int, Hashable, Sendable, CaseIterable, Codable, CustomStringConvertible {
        /// An unknown error occurred (0).
        case unknown = 0
        /// The parameters are invalid (1).
        case invalidParameters = 1
        /// The attribute handle is invalid (2).
        case invalidHandle = 2
        /// The peripheral is not connected (3).
        case notConnected = 3
        /// There is no room to complete the operation (4).
        case outOfSpace = 4
        /// The operation was cancelled (5).
        case operationCancelled = 5
        /// The connection timed out (6).
        case connectionTimeout = 6
        /// The peripheral disconnected (7).
        case peripheralDisconnected = 7
        /// The UUID may not be used (8).
        case uuidNotAllowed = 8
        /// The peripheral manager is already advertising (9).
        case alreadyAdvertising = 9
        /// The connection failed (10).
        case connectionFailed = 10
        /// No more connections can be made (11).
        case connectionLimitReached = 11
        /// The device is not known (12).
        case unknownDevice = 12
        /// The operation is not supported (13).
        case operationNotSupported = 13
        /// The peer removed its pairing information (14).
        case peerRemovedPairingInformation = 14
        /// Encrypting the link timed out (15).
        case encryptionTimedOut = 15
        /// Too many LE devices are paired already (16).
        case tooManyLEPairedDevices = 16
        /// bluetoothd is not running or not reachable on the system bus
        /// (100). Linux only.
        case bluetoothUnavailable = 100
        /// The system bus policy denied this process access to bluetoothd
        /// (101). Linux only.
        case accessDenied = 101
        /// The requested adapter (such as `hci1`) does not exist (102). Linux
        /// only.
        case adapterNotFound = 102
        /// The advertisement does not fit in the adapter's advertising data
        /// (103). Linux only.
        case advertisingDataTooLarge = 103
        /// Another manager in this process already uses the restore
        /// identifier (104). Linux only.
        case restoreIdentifierInUse = 104
        /// Pairing with the peripheral failed (105): an agent refused it (the app's
        /// ``PairingAgentDelegate``, or no agent at all), a passkey did not match, or the
        /// peripheral refused. bluetoothd ends such a link. Linux only.
        case pairingFailed = 105
        /// bluetoothd offers no advertisement monitor on the adapter (106), which passive
        /// scanning needs: bluetoothd runs without `--experimental` (`-E`), or the adapter has no
        /// LE. Linux only.
        case advertisementMonitorUnavailable = 106
        /// Another pairing or connection of the device is under way (107): bluetoothd refuses
        /// a second one (`org.bluez.Error.InProgress`). Linux only.
        case inProgress = 107
        /// bluetoothd offers the call only when started with `--experimental` (`-E`) (108), as
        /// with `Adapter1.ConnectDevice` behind ``CentralManager/connect(toAddress:type:)``. Linux only.
        case experimentalAPIUnavailable = 108

        /// A sentence describing the code, used as the default message of a
        /// ``BluetoothError``.
        public var message: String {
            switch self {
            case .unknown: "An unknown error occurred."
            case .invalidParameters: "The parameters are invalid."
            case .invalidHandle: "The attribute handle is invalid."
            case .notConnected: "The peripheral is not connected."
            case .outOfSpace: "There is no room to complete the operation."
            case .operationCancelled: "The operation was cancelled."
            case .connectionTimeout: "The connection timed out."
            case .peripheralDisconnected: "The peripheral disconnected."
            case .uuidNotAllowed: "The UUID is not allowed."
            case .alreadyAdvertising: "The peripheral manager is already advertising."
            case .connectionFailed: "The connection failed."
            case .connectionLimitReached: "The connection limit has been reached."
            case .unknownDevice: "The device is unknown."
            case .operationNotSupported: "The operation is not supported."
            case .peerRemovedPairingInformation: "The peer removed its pairing information."
            case .encryptionTimedOut: "Encrypting the link timed out."
            case .tooManyLEPairedDevices: "Too many LE devices are paired."
            case .bluetoothUnavailable: "The Bluetooth service (bluetoothd) is unavailable."
            case .accessDenied: "Access to the Bluetooth service was denied."
            case .adapterNotFound: "The Bluetooth adapter was not found."
            case .advertisingDataTooLarge: "The advertising data is too large."
            case .restoreIdentifierInUse: "The restore identifier is already in use."
            case .pairingFailed: "Pairing with the peripheral failed."
            case .advertisementMonitorUnavailable:
                "bluetoothd offers no advertisement monitor (org.bluez.AdvertisementMonitorManager1) on this adapter: passive scanning needs bluetoothd started with --experimental (-E) or Experimental = true in main.conf."
            case .inProgress: "Another pairing or connection of the device is in progress."
            case .experimentalAPIUnavailable:
                "bluetoothd offers this call only when started with --experimental (-E) or Experimental = true in main.conf."
            }
        }

        /// The case name, for logs.
        public var description: String {
            switch self {
            case .unknown: "unknown"
            case .invalidParameters: "invalidParameters"
            case .invalidHandle: "invalidHandle"
            case .notConnected: "notConnected"
            case .outOfSpace: "outOfSpace"
            case .operationCancelled: "operationCancelled"
            case .connectionTimeout: "connectionTimeout"
            case .peripheralDisconnected: "peripheralDisconnected"
            case .uuidNotAllowed: "uuidNotAllowed"
            case .alreadyAdvertising: "alreadyAdvertising"
            case .connectionFailed: "connectionFailed"
            case .connectionLimitReached: "connectionLimitReached"
            case .unknownDevice: "unknownDevice"
            case .operationNotSupported: "operationNotSupported"
            case .peerRemovedPairingInformation: "peerRemovedPairingInformation"
            case .encryptionTimedOut: "encryptionTimedOut"
            case .tooManyLEPairedDevices: "tooManyLEPairedDevices"
            case .bluetoothUnavailable: "bluetoothUnavailable"
            case .accessDenied: "accessDenied"
            case .adapterNotFound: "adapterNotFound"
            case .advertisingDataTooLarge: "advertisingDataTooLarge"
            case .restoreIdentifierInUse: "restoreIdentifierInUse"
            case .pairingFailed: "pairingFailed"
            case .advertisementMonitorUnavailable: "advertisementMonitorUnavailable"
            case .inProgress: "inProgress"
            case .experimentalAPIUnavailable: "experimentalAPIUnavailable"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence describing the failure; by default the code's
    /// ``Code/message``.
    public let message: String
    /// The error this one was made from, if any; not compared by `==`.
    public let underlying: (any Error & Sendable)?

    /// Creates a Bluetooth error.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: A description; defaults to `code.message`.
    ///   - underlying: The error this one was made from, if any.
    public init(_ code: Code, message: String? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message ?? code.message
        self.underlying = underlying
    }

    /// Compares code and message; ``underlying`` is ignored.
    public static func == (lhs: BluetoothError, rhs: BluetoothError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    /// Hashes code and message.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    /// The code and message, and the underlying error if there is one, for
    /// logs.
    public var description: String {
        let base = "BluetoothError.\(code): \(message)"
        guard let underlying else { return base }
        return base + " (underlying: \(underlying))"
    }
}

// Core Bluetooth's `CBError` also exposes each code as a static member.
extension BluetoothError {
    /// ``Code/unknown``, for `catch` patterns and comparisons with `code`.
    public static var unknown: Code { .unknown }
    /// ``Code/invalidParameters``, for `catch` patterns and comparisons with `code`.
    public static var invalidParameters: Code { .invalidParameters }
    /// ``Code/invalidHandle``, for `catch` patterns and comparisons with `code`.
    public static var invalidHandle: Code { .invalidHandle }
    /// ``Code/notConnected``, for `catch` patterns and comparisons with `code`.
    public static var notConnected: Code { .notConnected }
    /// ``Code/outOfSpace``, for `catch` patterns and comparisons with `code`.
    public static var outOfSpace: Code { .outOfSpace }
    /// ``Code/operationCancelled``, for `catch` patterns and comparisons with `code`.
    public static var operationCancelled: Code { .operationCancelled }
    /// ``Code/connectionTimeout``, for `catch` patterns and comparisons with `code`.
    public static var connectionTimeout: Code { .connectionTimeout }
    /// ``Code/peripheralDisconnected``, for `catch` patterns and comparisons with `code`.
    public static var peripheralDisconnected: Code { .peripheralDisconnected }
    /// ``Code/uuidNotAllowed``, for `catch` patterns and comparisons with `code`.
    public static var uuidNotAllowed: Code { .uuidNotAllowed }
    /// ``Code/alreadyAdvertising``, for `catch` patterns and comparisons with `code`.
    public static var alreadyAdvertising: Code { .alreadyAdvertising }
    /// ``Code/connectionFailed``, for `catch` patterns and comparisons with `code`.
    public static var connectionFailed: Code { .connectionFailed }
    /// ``Code/connectionLimitReached``, for `catch` patterns and comparisons with `code`.
    public static var connectionLimitReached: Code { .connectionLimitReached }
    /// ``Code/unknownDevice``, for `catch` patterns and comparisons with `code`.
    public static var unknownDevice: Code { .unknownDevice }
    /// ``Code/operationNotSupported``, for `catch` patterns and comparisons with `code`.
    public static var operationNotSupported: Code { .operationNotSupported }
    /// ``Code/peerRemovedPairingInformation``, for `catch` patterns and comparisons with `code`.
    public static var peerRemovedPairingInformation: Code { .peerRemovedPairingInformation }
    /// ``Code/encryptionTimedOut``, for `catch` patterns and comparisons with `code`.
    public static var encryptionTimedOut: Code { .encryptionTimedOut }
    /// ``Code/tooManyLEPairedDevices``, for `catch` patterns and comparisons with `code`.
    public static var tooManyLEPairedDevices: Code { .tooManyLEPairedDevices }
    /// ``Code/pairingFailed``, for `catch` patterns and comparisons with `code`. Linux only.
    public static var pairingFailed: Code { .pairingFailed }
    /// ``Code/advertisementMonitorUnavailable``, for `catch` patterns and comparisons with `code`. Linux only.
    public static var advertisementMonitorUnavailable: Code { .advertisementMonitorUnavailable }
    /// ``Code/inProgress``, for `catch` patterns and comparisons with `code`. Linux only.
    public static var inProgress: Code { .inProgress }
    /// ``Code/experimentalAPIUnavailable``, for `catch` patterns and comparisons with `code`. Linux only.
    public static var experimentalAPIUnavailable: Code { .experimentalAPIUnavailable }
}

extension BluetoothError.Code {
    /// Whether `error` is a ``BluetoothError`` with this code, so that
    /// `catch BluetoothError.connectionTimeout` works as with Core Bluetooth.
    public static func ~= (code: BluetoothError.Code, error: any Error) -> Bool {
        (error as? BluetoothError)?.code == code
    }
}
