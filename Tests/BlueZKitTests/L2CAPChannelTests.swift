import BlueZ
import Dispatch
import Foundation
import Glibc
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// ``L2CAPChannel`` over an `AF_UNIX` `SOCK_SEQPACKET` pair: the async and stream adapters with
/// the kernel's datagram semantics, without Bluetooth (the e2e tier has the real thing).
@Suite(.timeLimit(.minutes(5))) struct L2CAPChannelTests {
    /// A channel on one end of a pair (MTU 100), and the raw other end.
    final class Pair: Sendable {
        let channel: L2CAPChannel
        let peer: Int32
        init() throws {
            let (mine, theirs) = try seqpacketPair()
            let socket = BlueZL2CAPSocket(adopting: mine, queue: DispatchQueue(label: "test.l2cap"), defaultMTU: 100)
            channel = L2CAPChannel(
                peer: Central(identifier: UUID(), maximumUpdateValueLength: 20), psm: 0x80, socket: socket)
            peer = theirs
        }
        deinit { close(peer) }

        func send(_ bytes: [UInt8]) { #expect(Glibc.send(peer, bytes, bytes.count, 0) == bytes.count) }

        /// The next datagram from the channel (waits for it).
        func receive() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 70_000)
            let count = recv(peer, &buffer, buffer.count, 0)
            return count > 0 ? Array(buffer.prefix(count)) : []
        }
    }

    @Test func readReturnsEachSDUInOrderThenNilAtTheEnd() async throws {
        let pair = try Pair()
        pair.send([1, 2, 3])
        pair.send(Array(repeating: 7, count: 100))
        #expect(try await pair.channel.read() == Data([1, 2, 3]))
        #expect(try await pair.channel.read() == Data(repeating: 7, count: 100))
        shutdown(pair.peer, Int32(SHUT_WR))
        #expect(try await pair.channel.read() == nil)
        #expect(try await pair.channel.read() == nil, "the end stays the end")
    }

    @Test func writeSplitsIntoSDUsOfTheMTU() async throws {
        let pair = try Pair()
        #expect(pair.channel.maximumWriteLength == 100)
        let data = Data((0..<250).map { UInt8($0) })
        try await pair.channel.write(data)
        let sdus = [pair.receive(), pair.receive(), pair.receive()]
        #expect(sdus.map(\.count) == [100, 100, 50])
        #expect(Data(sdus.joined()) == data)
        try await pair.channel.write(Data())  // nothing to send, nothing sent
        try await pair.channel.write(Data([42]))
        #expect(pair.receive() == [42])
    }

    @Test func aWriteWaitsForThePeerToReadThenCompletesIntact() async throws {
        let pair = try Pair()
        // Far more than the socket buffers hold: the write must wait for the peer.
        let data = Data((0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let writer = Task { try await pair.channel.write(data) }
        try await waitUntil("the write waits for room") { !pair.channel.core.hasSpaceAvailable }
        var received = Data()
        while received.count < data.count {
            let sdu = pair.receive()
            if sdu.isEmpty { break }
            #expect(sdu.count <= 100)
            received.append(contentsOf: sdu)
        }
        try await writer.value
        #expect(received == data)
    }

    @Test func closeFailsWaitersAndEndsThePeersStream() async throws {
        let pair = try Pair()
        let channel = pair.channel
        let reader = Task { () throws(BluetoothError) -> Data? in try await channel.read() }
        try await waitUntil("the read waits") { channel.core.queue.sync { true } && !channel.core.hasBytesAvailable }
        channel.close()
        await #expect(throws: BluetoothError(.notConnected, message: "The L2CAP channel is closed.")) {
            try await reader.value
        }
        await #expect(throws: BluetoothError.self) { try await channel.write(Data([1])) }
        #expect(pair.receive() == [], "the peer sees the end")
    }

    @Test func aCancelledReadLosesNothing() async throws {
        let pair = try Pair()
        let channel = pair.channel
        let reader = Task { () throws(BluetoothError) -> Data? in try await channel.read() }
        reader.cancel()
        do {
            _ = try await reader.value
            Issue.record("a cancelled read returned")
        } catch {
            #expect((error as? BluetoothError)?.code == .operationCancelled)
        }
        pair.send([5, 6])
        #expect(try await channel.read() == Data([5, 6]))
    }

    @Test func thePeerClosingFailsWrites() async throws {
        let pair = try Pair()
        shutdown(pair.peer, Int32(SHUT_RDWR))  // not close: `Pair` closes it, and tests run in parallel
        do {
            for _ in 0..<1000 { try await pair.channel.write(Data([1])) }
            Issue.record("writes to a closed peer succeeded")
        } catch {
            #expect([.peripheralDisconnected, .notConnected].contains(error.code))
        }
    }

    @Test func theInputStreamReadsBytesAcrossSDUs() throws {
        let pair = try Pair()
        let input = pair.channel.inputStream
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(input.read(&buffer, maxLength: 4) == -1, "not open yet")
        input.open()
        pair.send([1, 2, 3, 4, 5, 6])
        #expect(input.read(&buffer, maxLength: 4) == 4)
        #expect(buffer == [1, 2, 3, 4])
        #expect(input.hasBytesAvailable)
        #expect(input.read(&buffer, maxLength: 4) == 2)
        #expect(buffer.prefix(2) == [5, 6])
        shutdown(pair.peer, Int32(SHUT_WR))
        #expect(input.read(&buffer, maxLength: 4) == 0)
        #expect(input.streamStatus == .atEnd)
    }

    @Test func theOutputStreamSendsOneSDUPerWrite() throws {
        let pair = try Pair()
        let output = pair.channel.outputStream
        output.open()
        #expect(output.hasSpaceAvailable)
        let bytes = [UInt8](repeating: 9, count: 150)
        #expect(output.write(bytes, maxLength: 150) == 100, "at most the MTU")
        #expect(pair.receive().count == 100)
        #expect(output.write([1, 2], maxLength: 2) == 2)
        #expect(pair.receive() == [1, 2])
    }

    @Test func closingBothStreamsClosesTheChannel() throws {
        let pair = try Pair()
        pair.channel.inputStream.open()
        pair.channel.outputStream.open()
        pair.channel.inputStream.close()
        pair.channel.outputStream.close()
        #expect(pair.receive() == [], "the peer sees the end")
        #expect(pair.channel.outputStream.write([1], maxLength: 1) == -1)
    }

    final class EventRecorder: NSObject, StreamDelegate, @unchecked Sendable {
        let events = PosixMutex<[UInt]>([])
        func stream(_ aStream: Stream, handle eventCode: Stream.Event) {
            events.withLock { $0.append(eventCode.rawValue) }
        }
    }

    @Test func streamEventsArriveOnTheScheduledRunLoop() async throws {
        let pair = try Pair()
        let recorder = EventRecorder()
        let done = PosixMutex(false)
        nonisolated(unsafe) let input = pair.channel.inputStream
        let thread = Thread {
            input.delegate = recorder
            input.schedule(in: .current, forMode: .default)
            input.open()
            while !done.withLock({ $0 }) { _ = RunLoop.current.run(mode: .default, before: Date() + 0.05) }
        }
        thread.start()
        defer { done.withLock { $0 = true } }
        try await waitUntil("open completed") {
            recorder.events.withLock { $0 }.contains(Stream.Event.openCompleted.rawValue)
        }
        pair.send([1])
        try await waitUntil("bytes available") {
            recorder.events.withLock { $0 }.contains(Stream.Event.hasBytesAvailable.rawValue)
        }
        shutdown(pair.peer, Int32(SHUT_WR))
        var byte: UInt8 = 0
        #expect(input.read(&byte, maxLength: 1) == 1)
        try await waitUntil("end encountered") {
            recorder.events.withLock { $0 }.contains(Stream.Event.endEncountered.rawValue)
        }
    }

    @Test func socketErrorsBecomeBluetoothErrorsKeepingTheErrno() throws {
        let refused = BluetoothError(l2cap: BlueZSocketError(errno: ECONNREFUSED, operation: "connect"))
        #expect(refused.code == .connectionFailed)
        #expect((refused.underlying as? BlueZSocketError)?.errno == ECONNREFUSED)
        #expect(BluetoothError(l2cap: BlueZSocketError(.invalidPSM, operation: "x")).code == .invalidParameters)
        #expect(BluetoothError(l2cap: BlueZSocketError(errno: ETIMEDOUT, operation: "x")).code == .connectionTimeout)
        #expect(
            BluetoothError(l2cap: BlueZSocketError(errno: EAFNOSUPPORT, operation: "x")).code == .operationNotSupported)
    }
}
