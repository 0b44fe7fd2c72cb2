public import Foundation
import Glibc

/// The directory where managers created with a restore identifier keep
/// their state between processes, as Core Bluetooth's state restoration.
///
/// Each identifier has one file in ``directory``, a JSON envelope with a
/// format marker, a version, the manager's role, the identifier itself and
/// the state. Saving writes a temporary file in the same directory, syncs
/// it, renames it over the old one and syncs the directory, so a crash
/// leaves either the old or the new state. The directory is created with
/// mode 0700 and files with mode 0600, whatever the umask. Any string is a
/// valid identifier: file names are derived from it (see
/// `fileName(for:)`), never taken from it.
///
/// A file that cannot be used (corrupt, truncated, written by a newer
/// BlueZKit, of another role or identifier) is reported once as a
/// ``RestorationError`` and moved aside to `<name>.unreadable`, so the next
/// save does not destroy it.
public struct RestorationStore: Sendable, Hashable {
    /// Which kind of manager saved a state.
    package enum Role: String, Sendable, Hashable, Codable, CaseIterable {
        /// A `CentralManager`.
        case central
        /// A `PeripheralManager`.
        case peripheral
    }

    /// The directory that holds one file per restore identifier.
    ///
    /// It is created, with its missing parents, on the first save.
    public var directory: URL

    /// Creates a store that keeps its files in `directory`.
    ///
    /// Nothing is created until the first save.
    public init(directory: URL) {
        self.directory = directory
    }

    /// The store in the user's XDG state directory:
    /// `$XDG_STATE_HOME/bluezkit/restoration`, or
    /// `~/.local/state/bluezkit/restoration` when `XDG_STATE_HOME` is unset,
    /// empty or not an absolute path.
    ///
    /// It is computed from the environment each time it is read.
    public static var standard: RestorationStore {
        RestorationStore(
            directory: standardDirectory(
                environment: ProcessInfo.processInfo.environment,
                homeDirectory: FileManager.default.homeDirectoryForCurrentUser))
    }

    /// The directory of ``standard`` for the given environment and home
    /// directory, following the XDG Base Directory specification.
    package static func standardDirectory(environment: [String: String], homeDirectory: URL) -> URL {
        let stateHome: URL
        if let value = environment["XDG_STATE_HOME"], value.hasPrefix("/") {
            stateHome = URL(fileURLWithPath: value, isDirectory: true)
        } else {
            stateHome = homeDirectory.appendingPathComponent(".local/state", isDirectory: true)
        }
        return stateHome.appendingPathComponent("bluezkit/restoration", isDirectory: true)
    }

    /// The identifiers that have saved state in this store, sorted.
    ///
    /// Lists ``directory`` and reads the envelope of each state file; files
    /// that are unreadable, of an unsupported version or misnamed, temporary
    /// files and `.unreadable` copies are skipped. Nothing is moved or
    /// reported; a missing directory gives an empty list. This is the
    /// counterpart of the Bluetooth launch-option keys of iOS.
    public func savedIdentifiers() -> [String] {
        savedEnvelopes().map(\.identifier).sorted()
    }

    /// The identifiers that have state saved by a manager of `role`, sorted;
    /// see ``savedIdentifiers()``.
    package func savedIdentifiers(for role: Role) -> [String] {
        savedEnvelopes().filter { $0.role == role.rawValue }.map(\.identifier).sorted()
    }

    /// Saves `payload` as the state of the `role` manager with `identifier`,
    /// replacing what was saved before.
    ///
    /// Creates the directory (mode 0700) if needed, then writes the envelope
    /// atomically to a 0600 file. Throws ``RestorationError/Code/writeFailed``
    /// when encoding or any file operation fails; the earlier state is then
    /// unchanged.
    package func save<Payload: Codable>(_ payload: Payload, role: Role, for identifier: String) throws(RestorationError)
    {
        let data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            data = try encoder.encode(
                Envelope(
                    format: Self.formatMarker, version: Self.formatVersion, role: role.rawValue,
                    identifier: identifier, payload: payload))
        } catch {
            throw failure(.writeFailed, "could not encode the \(role.rawValue) state", identifier, underlying: error)
        }
        let name = Self.fileName(for: identifier)
        let directoryPath = try directoryPath(for: identifier, code: .writeFailed)
        if let errorNumber = Self.createDirectory(atPath: directoryPath) {
            throw failure(
                .writeFailed, "could not create the directory \(directoryPath)", identifier, errno: errorNumber)
        }
        if let (operation, errorNumber) = Self.writeAtomically(data, directoryPath: directoryPath, name: name) {
            throw failure(
                .writeFailed, "could not \(operation) \(directoryPath)/\(name)", identifier, errno: errorNumber)
        }
    }

    /// The state the `role` manager with `identifier` saved, or `nil` when
    /// there is none.
    ///
    /// Reads the identifier's file — only a regular file of at most ``maximumFileSize`` bytes,
    /// not a symbolic link, in a directory of this user that no one else may write to (else
    /// ``RestorationError/Code/unsafeFile``, and the file is left alone) — and checks its
    /// envelope. When the file
    /// is not a usable state for this call (``RestorationError/Code/unreadable``,
    /// ``RestorationError/Code/unsupportedVersion``,
    /// ``RestorationError/Code/wrongRole``,
    /// ``RestorationError/Code/wrongIdentifier``), it is renamed to
    /// `<name>.unreadable`, replacing an earlier such copy, and the error is
    /// thrown; the next load returns `nil`. A failure to read the file at all
    /// throws ``RestorationError/Code/readFailed`` and leaves it in place.
    package func load<Payload: Codable>(_ type: Payload.Type, role: Role, for identifier: String)
        throws(RestorationError) -> Payload?
    {
        let directoryPath = try directoryPath(for: identifier, code: .readFailed)
        let filePath = directoryPath + "/" + Self.fileName(for: identifier)
        let data: Data
        switch Self.readFile(directory: directoryPath, name: Self.fileName(for: identifier)) {
        case .missing: return nil
        case .failed(let errorNumber):
            throw failure(.readFailed, "could not read \(filePath)", identifier, errno: errorNumber)
        case .refused(let reason):
            throw failure(.unsafeFile, "refused to read \(filePath): \(reason); it was left where it is", identifier)
        case .contents(let contents): data = contents
        }
        do throws(RestorationError) {
            return try decode(type, from: data, role: role, identifier: identifier, filePath: filePath)
        } catch {
            let movedAside = filePath + Self.unreadableSuffix
            let sentence = error.message.dropLast()  // without its full stop
            if rename(filePath, movedAside) == 0 {
                Self.syncDirectory(atPath: directoryPath)
                let message = "\(sentence); it was moved aside to \(movedAside)."
                throw RestorationError(error.code, message: message, underlying: error.underlying)
            }
            let reason = String(cString: strerror(errno))
            throw RestorationError(
                error.code, message: "\(sentence); moving it aside failed: \(reason).", underlying: error.underlying)
        }
    }

    /// Deletes the state saved for `identifier`, if any.
    ///
    /// Unlinks the identifier's file and syncs the directory; an
    /// `.unreadable` copy is kept. Throws
    /// ``RestorationError/Code/removeFailed`` when the file exists and cannot
    /// be deleted.
    package func removeState(for identifier: String) throws(RestorationError) {
        let directoryPath = try directoryPath(for: identifier, code: .removeFailed)
        let filePath = directoryPath + "/" + Self.fileName(for: identifier)
        if unlink(filePath) != 0 {
            let errorNumber = errno
            if errorNumber == ENOENT || errorNumber == ENOTDIR { return }
            throw failure(.removeFailed, "could not delete \(filePath)", identifier, errno: errorNumber)
        }
        Self.syncDirectory(atPath: directoryPath)
    }

    // MARK: - Envelope

    /// The value of the envelope's `format` key.
    package static let formatMarker = "bluezkit-restoration-state"
    /// The envelope version this build writes and reads.
    package static let formatVersion = 1

    private struct Envelope<Payload: Codable>: Codable {
        var format: String
        var version: Int
        var role: String
        var identifier: String
        var payload: Payload
    }

    /// The envelope without its payload, decoded first to tell what is wrong
    /// with a file.
    private struct Header: Decodable {
        var format: String?
        var version: Int?
        var role: String?
        var identifier: String?
    }

    private func decode<Payload: Codable>(
        _ type: Payload.Type, from data: Data, role: Role, identifier: String, filePath: String
    ) throws(RestorationError) -> Payload {
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch {
            throw failure(.unreadable, "\(filePath) is not a JSON state envelope", identifier, underlying: error)
        }
        guard header.format == Self.formatMarker, let version = header.version else {
            throw failure(.unreadable, "\(filePath) is not a BlueZKit restoration file", identifier)
        }
        guard version == Self.formatVersion else {
            let versions = "format version \(version); this BlueZKit reads version \(Self.formatVersion)"
            throw failure(.unsupportedVersion, "\(filePath) has \(versions)", identifier)
        }
        guard let savedIdentifier = header.identifier, savedIdentifier.utf8.elementsEqual(identifier.utf8) else {
            throw failure(.wrongIdentifier, "\(filePath) holds the state of another identifier", identifier)
        }
        guard header.role == role.rawValue else {
            throw failure(
                .wrongRole, "\(filePath) holds a \(header.role ?? "role-less") state, not a \(role.rawValue) state",
                identifier)
        }
        do {
            return try JSONDecoder().decode(Envelope<Payload>.self, from: data).payload
        } catch {
            throw failure(
                .unreadable, "the state in \(filePath) does not decode as \(Payload.self)", identifier,
                underlying: error)
        }
    }

    private func savedEnvelopes() -> [(identifier: String, role: String)] {
        guard directory.isFileURL,
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        else { return [] }
        return names.filter(Self.isStateFileName).compactMap { name in
            guard case .contents(let data) = Self.readFile(directory: directory.path, name: name),
                let header = try? JSONDecoder().decode(Header.self, from: data),
                header.format == Self.formatMarker, header.version == Self.formatVersion,
                let identifier = header.identifier, let role = header.role,
                Self.fileName(for: identifier) == name
            else { return nil }
            return (identifier, role)
        }
    }

    // MARK: - Errors

    private func directoryPath(for identifier: String, code: RestorationError.Code) throws(RestorationError) -> String {
        guard directory.isFileURL else {
            throw failure(code, "the store directory \(directory) is not a file URL", identifier)
        }
        return directory.path
    }

    private func failure(
        _ code: RestorationError.Code, _ what: String, _ identifier: String,
        underlying: (any Error & Sendable)? = nil, errno errorNumber: Int32? = nil
    ) -> RestorationError {
        var underlying = underlying
        var detail = ""
        if let errorNumber {
            underlying = POSIXError(POSIXErrorCode(rawValue: errorNumber) ?? .EIO)
            detail = ": " + String(cString: strerror(errorNumber))
        }
        let shown = identifier.count > 80 ? String(identifier.prefix(80)) + "…" : identifier
        return RestorationError(
            code, message: "Restore identifier \(shown.debugDescription): \(what)\(detail).", underlying: underlying)
    }

    // MARK: - POSIX file operations

    /// Creates `path` and its missing parents with mode 0700; returns the
    /// errno of a failure.
    private static func createDirectory(atPath path: String) -> Int32? {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return nil }
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + String(component)
            if mkdir(prefix, 0o700) == 0 {
                // mkdir applies the umask; the mode must be 0700 regardless.
                if chmod(prefix, 0o700) != 0 { return errno }
            } else if errno != EEXIST {
                return errno
            }
        }
        return nil
    }

    /// Writes `data` to a temporary file in the directory, syncs it, renames
    /// it to `name` and syncs the directory; returns the failed operation and
    /// its errno.
    private static func writeAtomically(_ data: Data, directoryPath: String, name: String) -> (String, Int32)? {
        var temporaryPath = ""
        var descriptor: Int32 = -1
        // A random name opened with O_EXCL, as mkstemp does; the Glibc module
        // does not export mkostemp, which would add O_CLOEXEC.
        for _ in 0..<100 where descriptor < 0 {
            let suffix = hexString(withUnsafeBytes(of: UInt64.random(in: .min ... .max)) { Array($0) })
            temporaryPath = directoryPath + "/" + temporaryFilePrefix + suffix
            descriptor = retryingOnInterrupt {
                open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            }
            if descriptor < 0, errno != EEXIST { return ("create a temporary file for", errno) }
        }
        guard descriptor >= 0 else { return ("create a temporary file for", EEXIST) }
        var failedStep = writeAndSync(data, to: descriptor)
        if close(descriptor) != 0, failedStep == nil, errno != EINTR {
            failedStep = ("close the temporary file for", errno)
        }
        if failedStep == nil, rename(temporaryPath, directoryPath + "/" + name) != 0 {
            failedStep = ("rename a temporary file to", errno)
        }
        if let failedStep {
            unlink(temporaryPath)
            return failedStep
        }
        syncDirectory(atPath: directoryPath)
        return nil
    }

    private static func writeAndSync(_ data: Data, to descriptor: Int32) -> (String, Int32)? {
        // open applies the umask to 0600; set the mode explicitly all the same.
        if fchmod(descriptor, 0o600) != 0 { return ("set the mode of the temporary file for", errno) }
        let writeError: Int32? = data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = retryingOnInterrupt {
                    write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                }
                if written < 0 { return errno }
                offset += written
            }
            return nil
        }
        if let writeError { return ("write the temporary file for", writeError) }
        if retryingOnInterrupt({ fsync(descriptor) }) != 0 { return ("sync the temporary file for", errno) }
        return nil
    }

    /// Syncs a directory so a rename or unlink in it is durable; best effort.
    static func syncDirectory(atPath path: String) {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else { return }
        _ = retryingOnInterrupt { fsync(descriptor) }
        close(descriptor)
    }

    static func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}
