import Foundation
import Locking

/// A live manager's hold on a restore identifier in one store directory.
///
/// ``RestorationStore/claim(_:)`` gives it; while it is held, claiming the
/// same identifier in the same directory fails with
/// ``RestorationError/Code/identifierInUse``. It is released by
/// ``release()`` or when the last reference goes away. The claim is
/// process-wide only: another process is not kept from using the identifier.
package final class RestorationClaim: Sendable {
    /// The claimed restore identifier.
    package let identifier: String
    /// The directory of the store the identifier was claimed in.
    package let directory: URL
    private let key: RestorationClaimRegistry.Key
    private let isHeld = PosixMutex(true)

    fileprivate init(identifier: String, directory: URL, key: RestorationClaimRegistry.Key) {
        self.identifier = identifier
        self.directory = directory
        self.key = key
    }

    /// Whether the claim has not been released yet.
    package var isActive: Bool { isHeld.withLock { $0 } }

    /// Gives the identifier up so another manager can claim it; calling it
    /// again does nothing.
    package func release() {
        let wasHeld = isHeld.withLock { held in
            defer { held = false }
            return held
        }
        if wasHeld { RestorationClaimRegistry.release(key) }
    }

    deinit { release() }
}

extension RestorationStore {
    /// Claims `identifier` in this store's directory for a live manager.
    ///
    /// Throws ``RestorationError/Code/identifierInUse`` while another claim
    /// of the same identifier in the same directory is held in this process.
    /// Directories are compared by their standardized paths (symbolic links
    /// are not resolved); identifiers by their UTF-8 bytes. No file is
    /// touched.
    package func claim(_ identifier: String) throws(RestorationError) -> RestorationClaim {
        let key = RestorationClaimRegistry.Key(
            directoryPath: RestorationClaimRegistry.normalizedPath(of: directory), identifier: Array(identifier.utf8))
        guard RestorationClaimRegistry.insert(key) else {
            let shown = identifier.count > 80 ? String(identifier.prefix(80)) + "…" : identifier
            throw RestorationError(
                .identifierInUse,
                message: "Restore identifier \(shown.debugDescription) is already used by another manager "
                    + "of this process with the store \(key.directoryPath).")
        }
        return RestorationClaim(identifier: identifier, directory: directory, key: key)
    }
}

/// The process-wide set of claimed (directory, identifier) pairs.
private enum RestorationClaimRegistry {
    struct Key: Hashable, Sendable {
        var directoryPath: String
        var identifier: [UInt8]
    }

    private static let claimed = PosixMutex<Set<Key>>([])

    /// Adds `key`; false when it is already claimed.
    static func insert(_ key: Key) -> Bool {
        claimed.withLock { $0.insert(key).inserted }
    }

    static func release(_ key: Key) {
        _ = claimed.withLock { $0.remove(key) }
    }

    static func normalizedPath(of directory: URL) -> String {
        guard directory.isFileURL else { return directory.absoluteString }
        var path = directory.standardizedFileURL.path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}
