#if canImport(Glibc)
    package import Glibc
#endif

/// The package's system calls on descriptors: one function per call, each returning a typed
/// result (``Errno`` on failure), with `EINTR` retried and `errno` read in one place,
/// ``valueOrErrno(retryOnInterrupt:_:)`` — the idea of swift-system's function of that name.
///
/// Every socket of the package (D-Bus's wake-ups and watches, BlueZ's notify, write, L2CAP and
/// listening sockets) goes through these, so no caller handles `EINTR` or reads `errno` itself:
/// a call interrupted by a signal before it did anything is simply made again. `close` and
/// `connect` are the exceptions, never retried: Linux has closed the descriptor whatever
/// `close` says, and an interrupted `connect` goes on in the background (a second one would
/// say `EALREADY`). Any thread.
package enum SystemCall {
    /// Makes `call` until it is not interrupted (when `retryOnInterrupt`): its value, or the
    /// `errno` it left when it returned -1 — read here, at once, and nowhere else.
    @inline(__always)
    static func valueOrErrno<Value: FixedWidthInteger>(
        retryOnInterrupt: Bool = true, _ call: () -> Value
    ) -> Result<Value, Errno> {
        while true {
            let value = call()
            if value != -1 { return .success(value) }
            let error = Glibc.errno
            if retryOnInterrupt && error == EINTR { continue }
            return .failure(Errno(error))
        }
    }

    /// Makes `call` (a system call that returns 0 or -1) as ``valueOrErrno(retryOnInterrupt:_:)``.
    @inline(__always)
    static func nothingOrErrno(retryOnInterrupt: Bool = true, _ call: () -> Int32) -> Result<Void, Errno> {
        valueOrErrno(retryOnInterrupt: retryOnInterrupt, call).map { _ in () }
    }

    // MARK: Data

    /// `recv(2)`: the number of bytes read into `buffer` (0 at the end of a stream, or for an
    /// empty datagram).
    package static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: Int32 = 0)
        -> Result<Int, Errno>
    {
        valueOrErrno { Glibc.recv(fd, buffer.baseAddress, buffer.count, flags) }
    }

    /// `send(2)`: the number of bytes sent from `bytes`.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, flags: Int32 = 0) -> Result<Int, Errno> {
        valueOrErrno { Glibc.send(fd, bytes.baseAddress, bytes.count, flags) }
    }

    /// `send(2)` of one byte without waiting and without `SIGPIPE`: how a thread is woken
    /// through its socket pair. Whether it went does not matter (a full pair is awake already).
    package static func wake(_ fd: Int32) {
        guard fd >= 0 else { return }
        var byte: UInt8 = 1
        _ = withUnsafeBytes(of: &byte) { send(fd, $0, flags: Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// Reads without waiting until nothing is left: the bytes of wake-ups sent with ``wake(_:)``.
    package static func drain(_ fd: Int32) {
        var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        while case .success(let count) = withUnsafeMutableBytes(
            of: &bytes,
            {
                receive(fd, into: $0, flags: Int32(MSG_DONTWAIT))
            }), count > 0
        {}
    }

    /// Whether `recvmmsg(2)` exists in this C library (a GNU extension the Swift `Glibc` module
    /// does not export, looked up once at run time).
    package static var hasReceiveMessages: Bool { receiveMessagesFunction != nil }

    private typealias ReceiveMessagesFunction =
        @convention(c) (Int32, UnsafeMutableRawPointer?, UInt32, Int32, UnsafeMutableRawPointer?) -> Int32

    private static let receiveMessagesFunction: ReceiveMessagesFunction? = {
        guard let symbol = dlsym(nil, "recvmmsg") else { return nil }  // nil: RTLD_DEFAULT
        return unsafeBitCast(symbol, to: ReceiveMessagesFunction.self)
    }()

    /// `recvmmsg(2)` into `count` `struct mmsghdr` at `headers`, without a time-out: how many
    /// were filled. `ENOSYS` where the C library lacks it (see ``hasReceiveMessages``).
    package static func receiveMessages(
        _ fd: Int32, headers: UnsafeMutableRawPointer, count: UInt32, flags: Int32
    ) -> Result<Int, Errno> {
        guard let function = receiveMessagesFunction else { return .failure(Errno(ENOSYS)) }
        return valueOrErrno { function(fd, headers, count, flags, nil) }.map(Int.init)
    }

    // MARK: Readiness

    /// `poll(2)` of the first `count` entries at `entries`: how many have events
    /// (0 when `timeout`, in milliseconds, ran out; -1 waits for ever). An interrupted wait
    /// starts again with the whole `timeout`.
    package static func poll(_ entries: UnsafeMutablePointer<pollfd>, count: Int, timeout: Int32)
        -> Result<Int, Errno>
    {
        valueOrErrno { Glibc.poll(entries, nfds_t(count), timeout) }.map(Int.init)
    }

    /// `poll(2)` of one descriptor for `events`: its `revents` (0 when `timeout` ran out).
    package static func poll(_ fd: Int32, events: Int16, timeout: Int32) -> Result<Int16, Errno> {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        return poll(&entry, count: 1, timeout: timeout).map { _ in entry.revents }
    }

    // MARK: Descriptors and sockets

    /// `close(2)`, never retried: on Linux the descriptor is gone even when it fails (`EINTR`
    /// included), and its number may already be someone else's.
    @discardableResult
    package static func close(_ fd: Int32) -> Result<Void, Errno> {
        nothingOrErrno(retryOnInterrupt: false) { Glibc.close(fd) }
    }

    /// `fcntl(fd, F_GETFL)` and `F_SETFL`: sets or clears `O_NONBLOCK`.
    @discardableResult
    package static func setNonBlocking(_ fd: Int32, _ nonBlocking: Bool) -> Result<Void, Errno> {
        valueOrErrno { fcntl(fd, F_GETFL) }.flatMap { flags in
            nothingOrErrno { fcntl(fd, F_SETFL, nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
        }
    }

    /// `fcntl(fd, F_SETFD, FD_CLOEXEC)`.
    @discardableResult
    package static func setCloseOnExec(_ fd: Int32) -> Result<Void, Errno> {
        nothingOrErrno { fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// `socket(2)`: the new descriptor.
    package static func socket(_ domain: Int32, _ type: Int32, _ protocolNumber: Int32) -> Result<Int32, Errno> {
        valueOrErrno { Glibc.socket(domain, type, protocolNumber) }
    }

    /// `socketpair(2)`: both ends.
    package static func socketPair(_ domain: Int32, _ type: Int32) -> Result<(Int32, Int32), Errno> {
        var fds: (Int32, Int32) = (-1, -1)
        return withUnsafeMutableBytes(of: &fds) { raw in
            nothingOrErrno { Glibc.socketpair(domain, type, 0, raw.baseAddress!.assumingMemoryBound(to: Int32.self)) }
        }.map { fds }
    }

    /// `bind(2)` to the `sockaddr` in `address`.
    package static func bind(_ fd: Int32, to address: UnsafeRawBufferPointer) -> Result<Void, Errno> {
        nothingOrErrno {
            Glibc.bind(fd, address.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
        }
    }

    /// `connect(2)` to the `sockaddr` in `address`: `EINPROGRESS` when a non-blocking connect is
    /// under way — also when it was interrupted, which is never retried: the connect goes on in
    /// the background (a second one would say `EALREADY`).
    package static func connect(_ fd: Int32, to address: UnsafeRawBufferPointer) -> Result<Void, Errno> {
        nothingOrErrno(retryOnInterrupt: false) {
            Glibc.connect(fd, address.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
        }.mapError { $0 == .interrupted ? Errno(EINPROGRESS) : $0 }
    }

    /// `listen(2)`.
    package static func listen(_ fd: Int32, backlog: Int32) -> Result<Void, Errno> {
        nothingOrErrno { Glibc.listen(fd, backlog) }
    }

    /// `accept(2)`: the new descriptor, with the peer's `sockaddr` written into `address`.
    package static func accept(_ fd: Int32, address: UnsafeMutableRawBufferPointer) -> Result<Int32, Errno> {
        var length = socklen_t(address.count)
        return valueOrErrno {
            Glibc.accept(fd, address.baseAddress?.assumingMemoryBound(to: sockaddr.self), &length)
        }
    }

    /// `getsockname(2)` into `address`: the length of the `sockaddr` written.
    package static func localAddress(_ fd: Int32, into address: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        var length = socklen_t(address.count)
        return nothingOrErrno {
            Glibc.getsockname(fd, address.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }.map { Int(length) }
    }

    /// `shutdown(2)` (`SHUT_RDWR`…).
    @discardableResult
    package static func shutdown(_ fd: Int32, _ how: Int32) -> Result<Void, Errno> {
        nothingOrErrno { Glibc.shutdown(fd, how) }
    }

    /// `getsockopt(2)` into `value`: the length written.
    package static func option(_ fd: Int32, level: Int32, name: Int32, into value: UnsafeMutableRawBufferPointer)
        -> Result<Int, Errno>
    {
        var length = socklen_t(value.count)
        return nothingOrErrno { Glibc.getsockopt(fd, level, name, value.baseAddress, &length) }.map { Int(length) }
    }

    /// `setsockopt(2)` to `value`.
    package static func setOption(_ fd: Int32, level: Int32, name: Int32, _ value: UnsafeRawBufferPointer)
        -> Result<Void, Errno>
    {
        nothingOrErrno { Glibc.setsockopt(fd, level, name, value.baseAddress, socklen_t(value.count)) }
    }

    /// The error a non-blocking `connect` ended with (`getsockopt(SO_ERROR)`): nil when it
    /// succeeded; the `getsockopt` failure if that failed.
    package static func pendingError(_ fd: Int32) -> Errno? {
        var error: Int32 = 0
        switch withUnsafeMutableBytes(of: &error, { option(fd, level: SOL_SOCKET, name: SO_ERROR, into: $0) }) {
        case .failure(let failure): return failure
        case .success: return error == 0 ? nil : Errno(error)
        }
    }

    // MARK: Processes

    /// `waitpid(2)` for `pid`: its status.
    @discardableResult
    package static func waitForExit(_ pid: pid_t) -> Result<Int32, Errno> {
        var status: Int32 = 0
        return valueOrErrno { waitpid(pid, &status, 0) }.map { _ in status }
    }
}
