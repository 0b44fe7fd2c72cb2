import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// Receives several datagrams with one system call: `recvmmsg(2)` with `MSG_WAITFORONE`, which
/// waits for the first and then takes, without waiting, those already there.
///
/// A notify socket's reading thread used to make two calls per lone notification: the `recv`
/// that waited and a second one that found the socket drained. With this it makes one, however
/// many arrived together. `recvmmsg` is a GNU extension that the Swift `Glibc` module does not
/// export (``SystemCall/receiveMessages(_:headers:count:flags:)`` looks it up at run time);
/// without it each call is one `recv` of one datagram.
///
/// At the end of the stream every entry reads as an empty datagram (the kernel counts each
/// `recvmsg` that returned 0), as `recv` returns 0 for both: the caller tells them apart by
/// the hang-up. One thread's: not thread-safe.
final class BlueZDatagramBatch {
    /// `struct mmsghdr`: a `msghdr` and the length received into it (64 bytes on LP64; Swift's
    /// stride pads this struct the same way C's array of them is laid out).
    private struct MessageHeader {
        var header: msghdr
        var length: UInt32
    }

    /// Whether `recvmmsg` is used: the C library has it and `MessageHeader` is laid out as C's.
    private static let receivesMessages =
        SystemCall.hasReceiveMessages && MemoryLayout<MessageHeader>.stride == MemoryLayout<msghdr>.size + 8

    private static let waitForOne: Int32 = 0x10000  // MSG_WAITFORONE

    /// The most datagrams one call takes.
    let capacity: Int
    /// The room for each datagram: an ATT value is at most 512 bytes, and a bigger buffer lets
    /// an oversized datagram show as one.
    static let datagramSize = 1024
    private let storage: UnsafeMutableRawBufferPointer
    private let vectors: UnsafeMutablePointer<iovec>
    private let headers: UnsafeMutablePointer<MessageHeader>

    /// Room for `capacity` datagrams (at least one; one call takes just one without `recvmmsg`).
    init(capacity: Int) {
        precondition(capacity > 0, "a batch holds at least one datagram")
        self.capacity = Self.receivesMessages ? capacity : 1
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity * Self.datagramSize, alignment: 16)
        vectors = UnsafeMutablePointer<iovec>.allocate(capacity: capacity)
        headers = UnsafeMutablePointer<MessageHeader>.allocate(capacity: capacity)
        for index in 0..<capacity {
            vectors[index] = iovec(
                iov_base: storage.baseAddress! + index * Self.datagramSize, iov_len: Self.datagramSize)
            headers[index] = MessageHeader(
                header: msghdr(
                    msg_name: nil, msg_namelen: 0, msg_iov: vectors + index, msg_iovlen: 1, msg_control: nil,
                    msg_controllen: 0, msg_flags: 0),
                length: 0)
        }
    }

    deinit {
        storage.deallocate()
        vectors.deallocate()
        headers.deallocate()
    }

    /// Waits (on a blocking socket) for at least one datagram and takes those already there, up
    /// to ``capacity``: how many (``SystemCall`` retries an interrupted wait).
    func receive(_ fd: Int32) -> Result<Int, Errno> {
        if Self.receivesMessages {
            return SystemCall.receiveMessages(
                fd, headers: UnsafeMutableRawPointer(headers), count: UInt32(capacity), flags: Self.waitForOne)
        }
        let buffer = UnsafeMutableRawBufferPointer(start: storage.baseAddress, count: Self.datagramSize)
        return SystemCall.receive(fd, into: buffer).map { count in
            headers[0].length = UInt32(count)
            return 1
        }
    }

    /// The bytes of datagram `index` of the last ``receive(_:)``, valid until the next one.
    func datagram(_ index: Int) -> UnsafeRawBufferPointer {
        precondition(index >= 0 && index < capacity, "datagram index out of range")
        let length = min(Int(headers[index].length), Self.datagramSize)
        return UnsafeRawBufferPointer(start: storage.baseAddress! + index * Self.datagramSize, count: length)
    }
}
