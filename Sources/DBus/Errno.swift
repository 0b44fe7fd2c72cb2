#if canImport(Glibc)
    import Glibc
#endif

/// The `errno` of a failed system call, as a value: what every ``SystemCall`` function fails with.
///
/// swift-system's `Errno` is the model (without the dependency). `errno` itself is read in one
/// place only, ``SystemCall/valueOrErrno(retryOnInterrupt:_:)``, right after the call that set it.
package struct Errno: Error, Sendable, Hashable, CustomStringConvertible {
    /// The number (`EAGAIN`, `EPIPE`, …).
    package var rawValue: Int32

    /// The error with number `rawValue`.
    package init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// Nothing to do now on a non-blocking descriptor: `EAGAIN` (the same number as `EWOULDBLOCK`
    /// on Linux, both checked).
    package var isWouldBlock: Bool { rawValue == EAGAIN || rawValue == EWOULDBLOCK }

    /// `strerror`'s text, e.g. "Broken pipe".
    package var description: String { String(cString: strerror(rawValue)) }

    /// `EINTR`: a signal came before the call did anything. ``SystemCall`` retries it (but for
    /// `close` and `connect`), so a caller sees it only from those.
    package static let interrupted = Errno(EINTR)
}
