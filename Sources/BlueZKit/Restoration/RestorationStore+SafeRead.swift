import Foundation
import Glibc

/// Reading a saved state without trusting the file system: the file is opened without following
/// a symbolic link and without blocking (a FIFO would block for ever), must be a regular file of
/// this user of a bounded size, in a directory of this user that nobody else may write to.
extension RestorationStore {
    /// The largest restoration file that is read: 1 MiB. A state is a few kilobytes; anything
    /// larger is refused (``RestorationError/Code/unsafeFile``) before it is read.
    public static let maximumFileSize = 1 << 20

    /// What reading a state file gave.
    enum ReadResult {
        /// No such file (or no directory).
        case missing
        /// An `errno` from a system call.
        case failed(Int32)
        /// Not safe to read, with why (a clause).
        case refused(String)
        case contents(Data)
    }

    /// Reads `name` in `directory` if it is safe to; `ENOENT` and `ENOTDIR` mean no file.
    static func readFile(directory: String, name: String) -> ReadResult {
        let directoryDescriptor = retryingOnInterrupt { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard directoryDescriptor >= 0 else {
            let errorNumber = errno
            return errorNumber == ENOENT || errorNumber == ENOTDIR ? .missing : .failed(errorNumber)
        }
        defer { close(directoryDescriptor) }
        // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
        let descriptor = retryingOnInterrupt {
            openat(directoryDescriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        }
        guard descriptor >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR: return .missing
            case ELOOP: return .refused("it is a symbolic link")
            case ENXIO: return .refused("it is not a regular file")
            case let errorNumber: return .failed(errorNumber)
            }
        }
        defer { close(descriptor) }
        var directoryInfo = stat()
        var info = stat()
        guard fstat(directoryDescriptor, &directoryInfo) == 0, fstat(descriptor, &info) == 0 else {
            return .failed(errno)
        }
        if let reason = unsafeDirectoryReason(directoryInfo) { return .refused(reason) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .refused("it is not a regular file") }
        guard info.st_uid == geteuid() else { return .refused("it belongs to user \(info.st_uid), not to this user") }
        guard info.st_size <= maximumFileSize else {
            return .refused("it has \(info.st_size) bytes, more than the \(maximumFileSize) a state may have")
        }
        return readBounded(descriptor)
    }

    /// Why a directory with `info` cannot be trusted with state files, or nil.
    private static func unsafeDirectoryReason(_ info: stat) -> String? {
        if info.st_uid != geteuid() { return "its directory belongs to user \(info.st_uid), not to this user" }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 { return "its directory may be written by its group or others" }
        return nil
    }

    /// Reads at most ``maximumFileSize`` bytes (a file that grew past it meanwhile is refused).
    private static func readBounded(_ descriptor: Int32) -> ReadResult {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                retryingOnInterrupt { read(descriptor, bytes.baseAddress, bytes.count) }
            }
            if count < 0 { return .failed(errno) }
            if count == 0 { return .contents(data) }
            data.append(contentsOf: buffer[..<count])
            if data.count > maximumFileSize { return .refused("it grew past \(maximumFileSize) bytes while read") }
        }
    }
}
