import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// The `accept(2)` a ``BlueZL2CAPListener`` makes, as a value: the kernel's in production, a
/// stand-in in tests that makes it fail as a busy system does (`EMFILE`, `ENOBUFS`, …).
///
/// Any thread; the listener calls it on its queue.
package struct BlueZAcceptCall: Sendable {
    /// Accepts one pending connection on `listener`: its new descriptor, with the peer's
    /// `sockaddr` written into `address`; or the `errno` of the failure.
    package typealias Call =
        @Sendable (_ listener: Int32, _ address: UnsafeMutableRawBufferPointer) -> Result<
            Int32, BlueZAcceptCall.Errno
        >

    /// An `errno` value, as the call reports it (swift-system's `Errno`, without the dependency).
    package struct Errno: Error, Sendable, Hashable {
        package var rawValue: Int32
        package init(_ rawValue: Int32) { self.rawValue = rawValue }
    }

    /// What a listener does after a failed `accept`.
    package enum Recovery: Sendable, Hashable {
        /// Nothing pending (`EAGAIN`): wait until the socket is readable.
        case waitForReadable
        /// That one connection failed (the peer left, a signal came): accept the next one now.
        case acceptNext
        /// The system is short of descriptors or memory: try again after a back-off, keep listening.
        case backOff
        /// The listening socket itself is broken (`EBADF`, `EINVAL` once closed…): stop listening.
        case stop
    }

    /// The call itself.
    package let call: Call

    /// A stand-in for the kernel's `accept`.
    package init(_ call: @escaping Call) { self.call = call }

    /// The kernel's `accept`.
    package static let system = BlueZAcceptCall { listener, address in
        SystemCall.accept(listener, address: address).mapError { Errno($0.rawValue) }
    }

    /// How a listener recovers from `error`. Linux passes a new connection's pending network
    /// error on from `accept` (`accept(2)`): those concern that connection only.
    package static func recovery(from error: Errno) -> Recovery {
        switch error.rawValue {
        case EAGAIN, EWOULDBLOCK: .waitForReadable
        case EINTR, ECONNABORTED, EPROTO, EPERM, ENETDOWN, ENETUNREACH, EHOSTDOWN, EHOSTUNREACH, ENONET, ENOPROTOOPT,
            ETIMEDOUT, ECONNRESET:
            .acceptNext
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: .backOff
        default: .stop
        }
    }

    /// The waits after consecutive `backOff` failures: 10 ms, doubling up to 1 s.
    package static func backOffDelay(afterFailures failures: Int) -> Duration {
        min(.milliseconds(10 << min(max(failures - 1, 0), 7)), .seconds(1))
    }
}
