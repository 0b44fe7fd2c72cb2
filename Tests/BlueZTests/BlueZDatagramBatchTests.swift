import Testing

@testable import BlueZ

#if canImport(Glibc)
    import Glibc
#endif

/// ``BlueZDatagramBatch``: one `recvmmsg` takes every datagram already there (up to its
/// capacity) with their own lengths, an empty datagram included, and the end of the stream
/// reads as empty datagrams once the peer has gone.
@Suite(.timeLimit(.minutes(1)))
struct BlueZDatagramBatchTests {
    static func pair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    static func send(_ bytes: [UInt8], to fd: Int32) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
    }

    @Test func oneCallTakesEveryDatagramThereWithItsLength() throws {
        let batch = BlueZDatagramBatch(capacity: 4)
        try #require(batch.capacity == 4, "recvmmsg is in glibc")
        let (ours, peer) = try Self.pair()
        defer {
            close(ours)
            close(peer)
        }
        Self.send([0x06, 72], to: peer)
        Self.send([], to: peer)
        Self.send([UInt8](repeating: 0xAB, count: 300), to: peer)
        #expect(try batch.receive(ours).get() == 3)
        #expect(Array(batch.datagram(0)) == [0x06, 72])
        #expect(batch.datagram(1).isEmpty)
        #expect(Array(batch.datagram(2)) == [UInt8](repeating: 0xAB, count: 300))
        // More than the capacity: the rest waits for the next call.
        for value in 1...6 { Self.send([UInt8(value)], to: peer) }
        #expect(try batch.receive(ours).get() == 4)
        #expect((0..<4).map { Array(batch.datagram($0)) } == [[1], [2], [3], [4]])
        #expect(try batch.receive(ours).get() == 2)
        #expect((0..<2).map { Array(batch.datagram($0)) } == [[5], [6]])
    }

    @Test func theEndReadsAsEmptyDatagramsAfterTheLastValue() throws {
        let batch = BlueZDatagramBatch(capacity: 4)
        try #require(batch.capacity == 4)
        let (ours, peer) = try Self.pair()
        defer { close(ours) }
        Self.send([0x06, 80], to: peer)
        close(peer)
        let count = try batch.receive(ours).get()
        #expect(count >= 1)
        #expect(Array(batch.datagram(0)) == [0x06, 80])
        for index in 1..<max(count, 1) { #expect(batch.datagram(index).isEmpty) }
        #expect(try batch.receive(ours).get() >= 1)
        #expect(batch.datagram(0).isEmpty)
    }
}
