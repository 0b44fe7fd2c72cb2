/// The error thrown when a string or byte buffer is not a Bluetooth UUID.
///
/// `BluetoothUUID(validating:)` throws it; `BluetoothUUID(parsing:)` returns
/// `nil` for the same inputs, and `BluetoothUUID(string:)` / `BluetoothUUID(data:)`
/// (Core Bluetooth's, which raise) trap with its message. The ``code`` says
/// what was wrong, ``input`` repeats the rejected text (or a hex dump of the
/// rejected bytes) and ``message`` explains it in one sentence.
public struct BluetoothUUIDError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong with the input.
    public enum Code: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// The string was empty.
        case empty
        /// The string was not 4, 8 or 36 characters long (a 16-bit, 32-bit
        /// or 128-bit UUID).
        case invalidLength
        /// The string contained a character that is neither a hexadecimal
        /// digit nor a hyphen (for example whitespace, braces or `G`).
        case invalidCharacter
        /// A hyphen was missing or out of place: a 4- or 8-digit UUID has
        /// none, a 36-character one has exactly the four of the
        /// `8-4-4-4-12` form.
        case misplacedHyphen
        /// A byte buffer was not 2, 4 or 16 bytes long.
        case invalidDataLength

        /// The code's name, for logs.
        public var description: String {
            switch self {
            case .empty: "empty"
            case .invalidLength: "invalidLength"
            case .invalidCharacter: "invalidCharacter"
            case .misplacedHyphen: "misplacedHyphen"
            case .invalidDataLength: "invalidDataLength"
            }
        }
    }

    /// What was wrong with the input.
    public let code: Code
    /// The rejected string, or the rejected bytes as lower-case hex.
    public let input: String
    /// A one-sentence explanation, suitable for a log line.
    public let message: String

    /// Creates an error for rejected input.
    ///
    /// - Parameters:
    ///   - code: What was wrong.
    ///   - input: The rejected text (or a hex dump of rejected bytes).
    ///   - message: An explanation; defaults to one derived from `code`.
    public init(_ code: Code, input: String, message: String? = nil) {
        self.code = code
        self.input = input
        self.message = message ?? Self.defaultMessage(for: code)
    }

    /// The message followed by the rejected input, for logs.
    public var description: String {
        "\(message) (input: \"\(input)\")"
    }

    private static func defaultMessage(for code: Code) -> String {
        switch code {
        case .empty:
            "A Bluetooth UUID string must not be empty."
        case .invalidLength:
            "A Bluetooth UUID string has 4, 8 or 36 characters."
        case .invalidCharacter:
            "A Bluetooth UUID string contains only hexadecimal digits and hyphens."
        case .misplacedHyphen:
            "A 128-bit Bluetooth UUID string has the form XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX."
        case .invalidDataLength:
            "Bluetooth UUID data is 2, 4 or 16 bytes long."
        }
    }
}
