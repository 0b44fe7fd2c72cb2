/// An error of the Attribute Protocol, as Core Bluetooth's `CBATTError`.
///
/// A remote peripheral answers a read, write or subscription with one, and
/// you answer a central's request with one through the peripheral manager's
/// `respond(to:withResult:)`. The ``code`` is the one-byte ATT error code;
/// ``message`` explains it; ``underlying`` keeps the error BlueZ reported,
/// when there was one.
///
/// Two errors are equal when their codes and messages are; ``underlying`` is
/// not compared. As with Core Bluetooth, you can match codes directly:
///
/// ```swift
/// catch ATTError.insufficientAuthentication { … }
/// if let error = error as? ATTError, error.code == .invalidOffset { … }
/// ```
public struct ATTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An ATT error code: the byte of an ATT Error Response, with Core
    /// Bluetooth's names for the codes of the Bluetooth Core Specification
    /// (Vol 3, Part F, 3.4.1.1).
    ///
    /// Every byte has a code: 0x00–0x11 are the named cases, 0x80–0x9F are
    /// ``application(_:)`` errors defined by the service, and any other byte
    /// (reserved values, the common profile and service codes 0xE0–0xFF) is
    /// ``other(_:)``. ``init(_:)`` and ``init(rawValue:)`` always choose the
    /// right case. Two codes are equal when their bytes are, so a hand-made
    /// `.other(0x01)` equals `.invalidHandle`, but only the latter matches a
    /// `case .invalidHandle:` pattern.
    public enum Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The request succeeded (0x00). Used only as the result you pass to
        /// `respond(to:withResult:)`.
        case success
        /// The attribute handle is invalid on this server (0x01).
        case invalidHandle
        /// The attribute's value cannot be read (0x02).
        case readNotPermitted
        /// The attribute's value cannot be written (0x03).
        case writeNotPermitted
        /// The request was malformed (0x04).
        case invalidPdu
        /// The link must be authenticated (paired) first (0x05).
        case insufficientAuthentication
        /// The server does not support the request (0x06).
        case requestNotSupported
        /// The offset is past the end of the value (0x07).
        case invalidOffset
        /// The client is not authorized for this request (0x08).
        case insufficientAuthorization
        /// Too many prepared writes are queued (0x09).
        case prepareQueueFull
        /// No attribute was found in the requested handle range (0x0A).
        case attributeNotFound
        /// The attribute cannot be read or written with a long (blob)
        /// request (0x0B).
        case attributeNotLong
        /// The encryption key is too short (0x0C).
        case insufficientEncryptionKeySize
        /// The value has the wrong length for this attribute (0x0D).
        case invalidAttributeValueLength
        /// The request failed for a reason the server cannot describe (0x0E).
        case unlikelyError
        /// The link must be encrypted first (0x0F).
        case insufficientEncryption
        /// The grouping attribute type is not supported (0x10).
        case unsupportedGroupType
        /// The server lacks the resources to complete the request (0x11).
        case insufficientResources
        /// An error defined by the service's own specification; the byte is
        /// the full code, 0x80–0x9F.
        case application(UInt8)
        /// Any other byte: reserved codes and the common profile and service
        /// error codes (0xE0–0xFF, such as 0xFD "client characteristic
        /// configuration descriptor improperly configured" or 0xFE
        /// "procedure already in progress").
        case other(UInt8)

        /// The named codes, 0x00–0x11, in order.
        public static let namedCodes: [Code] = [
            .success, .invalidHandle, .readNotPermitted, .writeNotPermitted, .invalidPdu,
            .insufficientAuthentication, .requestNotSupported, .invalidOffset,
            .insufficientAuthorization, .prepareQueueFull, .attributeNotFound,
            .attributeNotLong, .insufficientEncryptionKeySize, .invalidAttributeValueLength,
            .unlikelyError, .insufficientEncryption, .unsupportedGroupType, .insufficientResources,
        ]

        /// Creates the code for an ATT error byte; every byte has one.
        public init(_ byte: UInt8) {
            if Int(byte) < Self.namedCodes.count {
                self = Self.namedCodes[Int(byte)]
            } else if (0x80...0x9F).contains(byte) {
                self = .application(byte)
            } else {
                self = .other(byte)
            }
        }

        /// Creates the code for an integer, as Core Bluetooth's
        /// `CBATTError.Code(rawValue:)`; `nil` outside 0–255.
        public init?(rawValue: Int) {
            guard let byte = UInt8(exactly: rawValue) else { return nil }
            self.init(byte)
        }

        /// The ATT error byte.
        public var byte: UInt8 {
            switch self {
            case .success: 0x00
            case .invalidHandle: 0x01
            case .readNotPermitted: 0x02
            case .writeNotPermitted: 0x03
            case .invalidPdu: 0x04
            case .insufficientAuthentication: 0x05
            case .requestNotSupported: 0x06
            case .invalidOffset: 0x07
            case .insufficientAuthorization: 0x08
            case .prepareQueueFull: 0x09
            case .attributeNotFound: 0x0A
            case .attributeNotLong: 0x0B
            case .insufficientEncryptionKeySize: 0x0C
            case .invalidAttributeValueLength: 0x0D
            case .unlikelyError: 0x0E
            case .insufficientEncryption: 0x0F
            case .unsupportedGroupType: 0x10
            case .insufficientResources: 0x11
            case .application(let byte), .other(let byte): byte
            }
        }

        /// The ATT error byte as an integer, as Core Bluetooth's raw value.
        public var rawValue: Int { Int(byte) }

        /// Whether this is an application error, 0x80–0x9F.
        public var isApplicationError: Bool { (0x80...0x9F).contains(byte) }

        /// Compares the bytes of two codes.
        public static func == (lhs: Code, rhs: Code) -> Bool {
            lhs.byte == rhs.byte
        }

        /// Hashes the byte of the code.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(byte)
        }

        /// A sentence describing the code, used as the default message of an
        /// ``ATTError``.
        public var message: String {
            switch self {
            case .success: "The request succeeded."
            case .invalidHandle: "The attribute handle is invalid."
            case .readNotPermitted: "The attribute cannot be read."
            case .writeNotPermitted: "The attribute cannot be written."
            case .invalidPdu: "The request was malformed."
            case .insufficientAuthentication: "The link is not authenticated."
            case .requestNotSupported: "The request is not supported."
            case .invalidOffset: "The offset is invalid."
            case .insufficientAuthorization: "The client is not authorized."
            case .prepareQueueFull: "The prepare queue is full."
            case .attributeNotFound: "The attribute was not found."
            case .attributeNotLong: "The attribute is not long."
            case .insufficientEncryptionKeySize: "The encryption key is too short."
            case .invalidAttributeValueLength: "The value length is invalid."
            case .unlikelyError: "The request failed for an unlikely reason."
            case .insufficientEncryption: "The link is not encrypted."
            case .unsupportedGroupType: "The group type is not supported."
            case .insufficientResources: "The server has insufficient resources."
            case .application(let byte): "The service reported application error \(Self.hex(byte))."
            case .other(let byte): "The server reported ATT error \(Self.hex(byte))."
            }
        }

        /// The case name and byte, for logs, such as
        /// `"invalidOffset (0x07)"` or `"application (0x85)"`.
        public var description: String {
            let name =
                switch self {
                case .success: "success"
                case .invalidHandle: "invalidHandle"
                case .readNotPermitted: "readNotPermitted"
                case .writeNotPermitted: "writeNotPermitted"
                case .invalidPdu: "invalidPdu"
                case .insufficientAuthentication: "insufficientAuthentication"
                case .requestNotSupported: "requestNotSupported"
                case .invalidOffset: "invalidOffset"
                case .insufficientAuthorization: "insufficientAuthorization"
                case .prepareQueueFull: "prepareQueueFull"
                case .attributeNotFound: "attributeNotFound"
                case .attributeNotLong: "attributeNotLong"
                case .insufficientEncryptionKeySize: "insufficientEncryptionKeySize"
                case .invalidAttributeValueLength: "invalidAttributeValueLength"
                case .unlikelyError: "unlikelyError"
                case .insufficientEncryption: "insufficientEncryption"
                case .unsupportedGroupType: "unsupportedGroupType"
                case .insufficientResources: "insufficientResources"
                case .application: "application"
                case .other: "other"
                }
            return "\(name) (\(Self.hex(byte)))"
        }

        /// `0x` and two lower-case hexadecimal digits.
        static func hex(_ byte: UInt8) -> String {
            let digits = String(byte, radix: 16)
            return "0x" + (digits.count < 2 ? "0" + digits : digits)
        }
    }

    /// The ATT error code.
    public let code: Code
    /// A sentence describing the error; by default the code's
    /// ``Code/message``.
    public let message: String
    /// The error this one was made from, such as the D-Bus error BlueZ
    /// replied with; not compared by `==`.
    public let underlying: (any Error & Sendable)?

    /// Creates an ATT error.
    ///
    /// - Parameters:
    ///   - code: The ATT error code.
    ///   - message: A description; defaults to `code.message`.
    ///   - underlying: The error this one was made from, if any.
    public init(_ code: Code, message: String? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message ?? code.message
        self.underlying = underlying
    }

    /// Compares code and message; ``underlying`` is ignored.
    public static func == (lhs: ATTError, rhs: ATTError) -> Bool {
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
        let base = "ATTError.\(code): \(message)"
        guard let underlying else { return base }
        return base + " (underlying: \(underlying))"
    }
}

// Core Bluetooth's `CBATTError` also exposes each code as a static member,
// which `catch CBATTError.invalidOffset` and `.code == CBATTError.invalidOffset` use.
extension ATTError {
    /// ``Code/success``, for `catch ATTError.success` and comparisons with `code`.
    public static var success: Code { .success }
    /// ``Code/invalidHandle``, for `catch ATTError.invalidHandle` and comparisons with `code`.
    public static var invalidHandle: Code { .invalidHandle }
    /// ``Code/readNotPermitted``, for `catch ATTError.readNotPermitted` and comparisons with `code`.
    public static var readNotPermitted: Code { .readNotPermitted }
    /// ``Code/writeNotPermitted``, for `catch ATTError.writeNotPermitted` and comparisons with `code`.
    public static var writeNotPermitted: Code { .writeNotPermitted }
    /// ``Code/invalidPdu``, for `catch ATTError.invalidPdu` and comparisons with `code`.
    public static var invalidPdu: Code { .invalidPdu }
    /// ``Code/insufficientAuthentication``, for `catch ATTError.insufficientAuthentication` and comparisons with `code`.
    public static var insufficientAuthentication: Code { .insufficientAuthentication }
    /// ``Code/requestNotSupported``, for `catch ATTError.requestNotSupported` and comparisons with `code`.
    public static var requestNotSupported: Code { .requestNotSupported }
    /// ``Code/invalidOffset``, for `catch ATTError.invalidOffset` and comparisons with `code`.
    public static var invalidOffset: Code { .invalidOffset }
    /// ``Code/insufficientAuthorization``, for `catch ATTError.insufficientAuthorization` and comparisons with `code`.
    public static var insufficientAuthorization: Code { .insufficientAuthorization }
    /// ``Code/prepareQueueFull``, for `catch ATTError.prepareQueueFull` and comparisons with `code`.
    public static var prepareQueueFull: Code { .prepareQueueFull }
    /// ``Code/attributeNotFound``, for `catch ATTError.attributeNotFound` and comparisons with `code`.
    public static var attributeNotFound: Code { .attributeNotFound }
    /// ``Code/attributeNotLong``, for `catch ATTError.attributeNotLong` and comparisons with `code`.
    public static var attributeNotLong: Code { .attributeNotLong }
    /// ``Code/insufficientEncryptionKeySize``, for `catch ATTError.insufficientEncryptionKeySize` and comparisons with `code`.
    public static var insufficientEncryptionKeySize: Code { .insufficientEncryptionKeySize }
    /// ``Code/invalidAttributeValueLength``, for `catch ATTError.invalidAttributeValueLength` and comparisons with `code`.
    public static var invalidAttributeValueLength: Code { .invalidAttributeValueLength }
    /// ``Code/unlikelyError``, for `catch ATTError.unlikelyError` and comparisons with `code`.
    public static var unlikelyError: Code { .unlikelyError }
    /// ``Code/insufficientEncryption``, for `catch ATTError.insufficientEncryption` and comparisons with `code`.
    public static var insufficientEncryption: Code { .insufficientEncryption }
    /// ``Code/unsupportedGroupType``, for `catch ATTError.unsupportedGroupType` and comparisons with `code`.
    public static var unsupportedGroupType: Code { .unsupportedGroupType }
    /// ``Code/insufficientResources``, for `catch ATTError.insufficientResources` and comparisons with `code`.
    public static var insufficientResources: Code { .insufficientResources }
}

extension ATTError.Code {
    /// Whether `error` is an ``ATTError`` with this code, so that
    /// `catch ATTError.invalidOffset` works as with Core Bluetooth.
    public static func ~= (code: ATTError.Code, error: any Error) -> Bool {
        (error as? ATTError)?.code == code
    }
}
