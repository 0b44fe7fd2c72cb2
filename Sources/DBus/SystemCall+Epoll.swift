internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// `epoll(7)`, one function per call as the rest of ``SystemCall``: what a D-Bus connection's
/// pair of reading threads waits with (``DedicatedReaderPair``), for `EPOLLEXCLUSIVE`, which
/// `poll(2)` has no equivalent of; and the other calls that pair makes.
extension SystemCall {
    /// `epoll_create1(EPOLL_CLOEXEC)`: the new epoll descriptor.
    static func epollCreate() -> Result<Int32, Errno> {
        valueOrErrno { epoll_create1(CDBUS_EPOLL_CLOEXEC) }
    }

    /// `epoll_ctl(EPOLL_CTL_ADD)` of `fd` for input (`EPOLLIN`), with `EPOLLEXCLUSIVE` when
    /// `exclusive`: of the epoll descriptors waiting for `fd`, one is woken per event, not all.
    /// `fd` is the event's data.
    static func epollAdd(_ epoll: Int32, _ fd: Int32, exclusive: Bool) -> Result<Void, Errno> {
        var event = epoll_event()
        event.events = CDBUS_EPOLLIN | (exclusive ? CDBUS_EPOLLEXCLUSIVE : 0)
        event.data.fd = fd
        return nothingOrErrno { epoll_ctl(epoll, CDBUS_EPOLL_CTL_ADD, fd, &event) }
    }

    /// `epoll_ctl(EPOLL_CTL_DEL)` of `fd`.
    static func epollRemove(_ epoll: Int32, _ fd: Int32) -> Result<Void, Errno> {
        var event = epoll_event()
        return nothingOrErrno { epoll_ctl(epoll, CDBUS_EPOLL_CTL_DEL, fd, &event) }
    }

    /// `epoll_wait(2)` for ever (an interrupted wait is made again): how many ready events were
    /// written to the start of `events` (each one's data is the descriptor given to
    /// ``epollAdd(_:_:exclusive:)``). An empty `events` is `EINVAL`, as the kernel says.
    ///
    /// The buffer's start is unwrapped here: glibc 2.41 (Debian 13) declares the parameter
    /// non-null, so Swift imports it as a non-optional pointer there and an optional one with
    /// glibc 2.36 (Debian 12); a non-optional pointer passes to both.
    static func epollWait(_ epoll: Int32, _ events: UnsafeMutableBufferPointer<epoll_event>) -> Result<Int, Errno> {
        guard let start = events.baseAddress, !events.isEmpty else { return .failure(Errno(EINVAL)) }
        return valueOrErrno { epoll_wait(epoll, start, Int32(events.count), -1) }.map(Int.init)
    }

    /// `fcntl(fd, F_DUPFD_CLOEXEC, 0)`: a new descriptor for the same open file.
    static func duplicate(_ fd: Int32) -> Result<Int32, Errno> {
        valueOrErrno { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// Names the calling thread (at most 15 bytes are kept): writes `/proc/thread-self/comm`,
    /// which is `prctl(PR_SET_NAME)` without a variadic call. Whether it worked does not matter.
    static func nameCurrentThread(_ name: String) {
        let fd = Glibc.open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        var bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
}
