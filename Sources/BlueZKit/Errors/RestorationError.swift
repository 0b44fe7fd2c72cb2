/// An error of the state-restoration store: a saved state that cannot be
/// used, a failed file operation, or a restore identifier already in use.
///
/// ``RestorationStore`` gives it when loading finds a file it cannot use (the
/// file has then been moved aside to `<name>.unreadable`, so report the error
/// once and carry on without restored state), when saving or removing fails,
/// and when a second live manager claims an identifier. ``message`` names the
/// identifier and the file; ``underlying`` keeps the system or decoding error
/// it was made from.
///
/// Two errors are equal when their codes and messages are; ``underlying`` is
/// not compared.
public struct RestorationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// The saved file is not a BlueZKit restoration file: empty,
        /// truncated, not JSON, another format, or a payload that does not
        /// decode as the requested type.
        case unreadable
        /// The saved file is a BlueZKit restoration file of a format version
        /// this build does not read (such as one written by a newer BlueZKit).
        case unsupportedVersion
        /// The saved file holds the state of the other role (a peripheral
        /// manager's state where a central manager's was asked for, or the
        /// reverse).
        case wrongRole
        /// The saved file holds the state of a different restore identifier
        /// (a copied or renamed file, or a file-name hash collision).
        case wrongIdentifier
        /// Reading the saved file failed for a reason other than its content,
        /// such as a permission error; the file is left where it is.
        case readFailed
        /// Creating the directory or writing, syncing or renaming the file
        /// failed; the previously saved state, if any, is unchanged.
        case writeFailed
        /// Deleting the saved file failed.
        case removeFailed
        /// Another live manager in this process already claimed the restore
        /// identifier in the same store directory.
        case identifierInUse
        /// The saved file was not read because reading it would not be safe: it is
        /// not a regular file (a symbolic link, a FIFO, a device), it is larger than
        /// ``RestorationStore/maximumFileSize``, or it or its directory belongs to
        /// another user, or the directory may be written by its group or others.
        /// The file is left where it is.
        case unsafeFile

        /// The case name, for logs.
        public var description: String {
            switch self {
            case .unreadable: "unreadable"
            case .unsupportedVersion: "unsupportedVersion"
            case .wrongRole: "wrongRole"
            case .wrongIdentifier: "wrongIdentifier"
            case .readFailed: "readFailed"
            case .writeFailed: "writeFailed"
            case .removeFailed: "removeFailed"
            case .identifierInUse: "identifierInUse"
            case .unsafeFile: "unsafeFile"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence describing the failure, naming the identifier and file.
    public let message: String
    /// The error this one was made from (a `POSIXError`, a `DecodingError`,
    /// …), if any; not compared by `==`.
    public let underlying: (any Error & Sendable)?

    /// Creates a restoration error.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: A sentence describing the failure.
    ///   - underlying: The error this one was made from, if any.
    public init(_ code: Code, message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Compares code and message; ``underlying`` is ignored.
    public static func == (lhs: RestorationError, rhs: RestorationError) -> Bool {
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
        let base = "RestorationError.\(code): \(message)"
        guard let underlying else { return base }
        return base + " (underlying: \(underlying))"
    }
}
