/// The error thrown when a Core Bluetooth advertisement dictionary holds a
/// value BlueZKit cannot use.
///
/// `AdvertisementData(dictionary:)` throws it, naming the offending ``key``.
/// A peripheral manager reports it to `peripheralManagerDidStartAdvertising`
/// wrapped in a ``BluetoothError`` with code `.invalidParameters`.
public struct AdvertisementDataError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong with the value.
    public enum Code: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// The value has a type the key does not take, such as a `String`
        /// for `CBAdvertisementDataServiceUUIDsKey`.
        case wrongValueType
        /// The value has the right type but is out of range, such as a
        /// transmit power outside -127…127 dBm.
        case valueOutOfRange

        /// The case name, for logs.
        public var description: String {
            switch self {
            case .wrongValueType: "wrongValueType"
            case .valueOutOfRange: "valueOutOfRange"
            }
        }
    }

    /// What was wrong with the value.
    public let code: Code
    /// The dictionary key whose value was rejected, such as
    /// `"kCBAdvDataServiceUUIDs"`.
    public let key: String
    /// A sentence naming the key, the expected type and what was found.
    public let message: String

    /// Creates an error for the value of `key`.
    public init(_ code: Code, key: String, message: String) {
        self.code = code
        self.key = key
        self.message = message
    }

    /// The message, for logs.
    public var description: String { message }
}
