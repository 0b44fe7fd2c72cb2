import Foundation
import Testing
import UARTProfile

/// The UART bridge's pattern, chunking, framing, echo checks, queue and figures.
@Suite(.timeLimit(.minutes(5))) struct UARTProfileTests {
    let pattern = TestPattern(seed: 42)

    @Test func thePatternIsDeterministicAndHasNoShortPeriod() {
        let bytes = pattern.bytes(0..<4096)
        #expect(bytes == TestPattern(seed: 42).bytes(0..<4096))
        #expect(bytes != TestPattern(seed: 43).bytes(0..<4096))
        // Any slice is the same bytes as taken one by one, from any start.
        #expect(pattern.bytes(13..<77) == Data((13..<77).map(pattern.byte(at:))))
        // No two 16-byte blocks are equal: a repeated or skipped chunk cannot look right.
        let blocks = stride(from: 0, to: 4096, by: 16).map { bytes[$0..<$0 + 16] }
        #expect(Set(blocks.map { Data($0) }).count == blocks.count)
    }

    @Test func theChunkerCutsAsTheLinkAllowsAndStopsAtTheTotal() {
        var chunker = PatternChunker(pattern: pattern, total: 1000)
        var sent = Data()
        var lengths: [Int] = []
        for maximum in [20, 512, 0, 300] {
            guard let chunk = chunker.next(maximumLength: maximum) else { break }
            lengths.append(chunk.count)
            sent.append(chunk)
        }
        #expect(lengths == [20, 512, 1, 300])
        #expect(chunker.remaining == 167)
        while let chunk = chunker.next(maximumLength: 100) { sent.append(chunk) }
        #expect(chunker.isFinished)
        #expect(sent == pattern.bytes(0..<1000))
        #expect(chunker.next(maximumLength: 100) == nil)
    }

    @Test func framesCarryTheirOffsetAndAtLeastOneByte() throws {
        var chunker = PatternChunker(pattern: pattern, total: 600)
        let first = chunker.nextFrame(maximumLength: 512)
        #expect(first?.count == 512)
        let second = try #require(chunker.nextFrame(maximumLength: 2) as Data?)  // no room: one byte anyway
        #expect(second.count == UARTFrame.headerLength + 1)
        let (offset, payload) = try #require(UARTFrame.parse(second))
        #expect(offset == 508 && payload == pattern.bytes(508..<509))
        #expect(UARTFrame.make(offset: 0x0102_0304, payload: Data([9])) == Data([4, 3, 2, 1, 9]))
        #expect(UARTFrame.parse(Data([0, 0, 0, 0])) == nil)
    }

    @Test func theEchoVerifierAcceptsAnyCutButNotAWrongByte() {
        var verifier = EchoVerifier(pattern: pattern, expected: 100)
        #expect(verifier.consume(pattern.bytes(0..<33)) == .incomplete)
        #expect(verifier.consume(pattern.bytes(33..<99)) == .incomplete)
        #expect(verifier.consume(pattern.bytes(99..<100)) == .complete)

        var lost = EchoVerifier(pattern: pattern, expected: 100)
        lost.consume(pattern.bytes(0..<10))
        let skipped = pattern.bytes(20..<30)  // 10…19 lost
        #expect(
            lost.consume(skipped)
                == .failed(.mismatch(offset: 10, expected: pattern.byte(at: 10), received: pattern.byte(at: 20))))
        #expect(lost.consume(pattern.bytes(10..<20)) == lost.status, "a failed echo stays failed")

        var long = EchoVerifier(pattern: pattern, expected: 10)
        #expect(long.consume(pattern.bytes(0..<11)) == .failed(.tooLong(received: 11, expected: 10)))
    }

    @Test func theFrameVerifierPutsReorderedFramesBackInOrder() {
        var chunker = PatternChunker(pattern: pattern, total: 1000)
        var frames: [Data] = []
        while let frame = chunker.nextFrame(maximumLength: 104) { frames.append(frame) }
        #expect(frames.count == 10)
        var verifier = FrameVerifier(pattern: pattern, expected: 1000)
        // Three bearers' worth of shuffling: 2 before 1, 5 before 3 and 4, the last in the middle.
        for index in [0, 2, 1, 5, 9, 3, 4, 6, 7] { #expect(verifier.consume(frames[index]) == .incomplete) }
        #expect(verifier.consume(frames[8]) == .complete)
        #expect(verifier.received == 1000 && verifier.frames == 10)
        #expect(verifier.framesOutOfOrder == 3)  // 2, 5 and 9 came early
    }

    @Test func theFrameVerifierCatchesRepeatedCorruptAndStrayFrames() throws {
        var chunker = PatternChunker(pattern: pattern, total: 300)
        let frames = (0..<2).compactMap { _ in chunker.nextFrame(maximumLength: 104) }
        try #require(frames.count == 2)
        let (a, b) = (frames[0], frames[1])

        var repeated = FrameVerifier(pattern: pattern, expected: 300)
        repeated.consume(a)
        #expect(repeated.consume(a) == .failed(.frame(.repeated(offset: 0))))

        var early = FrameVerifier(pattern: pattern, expected: 300)
        early.consume(b)
        #expect(early.consume(b) == .failed(.frame(.repeated(offset: 100))), "an early frame twice")

        var corrupt = FrameVerifier(pattern: pattern, expected: 300)
        var damaged = b
        damaged[damaged.startIndex + 10] ^= 0xFF  // payload byte 6: transfer byte 106
        #expect(
            corrupt.consume(damaged)
                == .failed(
                    .frame(
                        .mismatch(offset: 106, expected: pattern.byte(at: 106), received: pattern.byte(at: 106) ^ 0xFF))
                ))

        var stray = FrameVerifier(pattern: pattern, expected: 150)
        stray.consume(a)
        #expect(stray.consume(b) == .failed(.frame(.outOfRange(offset: 100, end: 200, expected: 150))))
        var short = FrameVerifier(pattern: pattern, expected: 150)
        #expect(short.consume(Data([1, 2])) == .failed(.frame(.notAFrame(length: 2))))
    }

    @Test func theEchoQueueKeepsChunksWholeUntilTaken() {
        var queue = EchoQueue()
        queue.append(Data([1, 2, 3]))
        queue.append(Data())
        queue.append(Data([4, 5, 6, 7, 8]))
        #expect(queue.byteCount == 8)
        // A refused update takes nothing: the same chunk is offered again.
        #expect(queue.front(maximumLength: 20) == Data([1, 2, 3]))
        #expect(queue.front(maximumLength: 20) == Data([1, 2, 3]))
        queue.removeFront(3)
        // Longer than a notification may be: in pieces.
        #expect(queue.front(maximumLength: 2) == Data([4, 5]))
        queue.removeFront(2)
        #expect(queue.front(maximumLength: 20) == Data([6, 7, 8]))
        queue.removeFront(3)
        #expect(queue.isEmpty && queue.byteCount == 0 && queue.front(maximumLength: 20) == nil)
    }

    @Test func throughputReadsAsHumansExpect() {
        #expect(Throughput(bytes: 65_536, seconds: 1.5).bytesPerSecond == 43_691)
        #expect(Throughput(bytes: 65_536, seconds: 1.5).description == "43.7 kB/s")
        #expect(Throughput(bytes: 500, seconds: 1).description == "500 B/s")
        #expect(Throughput(bytes: 2_500_000, seconds: 2).description == "1.25 MB/s")
        #expect(Throughput(bytes: 1_000, seconds: 0).bytesPerSecond == 0)
        #expect(Throughput(bytes: 1, seconds: 1.2345).secondsDescription == "1.23 s")
        #expect(Throughput(bytes: 1, seconds: 0.05).secondsDescription == "0.05 s")
    }

    @Test func thePSMIsTwoLittleEndianBytes() {
        #expect(UARTProfile.encode(psm: 0x0081) == Data([0x81, 0x00]))
        #expect(UARTProfile.decodePSM(Data([0x81, 0x00])) == 0x0081)
        #expect(UARTProfile.decodePSM(Data([0x81])) == nil)
        #expect(UARTProfile.decodePSM(Data([1, 2, 3]).dropFirst()) == 0x0302)
    }

    @Test func theCommandLineNamesARoleAndItsOptions() throws {
        let central = try BridgeOptions(parsing: [
            "central", "--adapter", "hci0", "--mode", "l2cap", "--bytes", "1000", "--chunk=100", "--json",
        ])
        #expect(central.role == .central && central.adapter == "hci0" && central.modes == [.l2cap])
        #expect(central.bytes == 1000 && central.chunk == 100 && central.json && central.name == nil)
        let peripheral = try BridgeOptions(parsing: ["peripheral", "--name", "UART"])
        #expect(peripheral.role == .peripheral && peripheral.name == "UART" && peripheral.modes == [.gatt])
        #expect(peripheral.bytes == 65_536 && !peripheral.json)
        #expect(try BridgeOptions(parsing: ["central", "--mode", "both"]).modes == [.gatt, .l2cap])
        for bad in [
            [], ["bridge"], ["central", "--mode", "serial"], ["central", "--bytes", "0"], ["central", "--chunk", "4"],
            ["peripheral", "--bytes", "10"], ["central", "--bogus"],
        ] {
            #expect(throws: BridgeUsageError.self, "\(bad)") { try BridgeOptions(parsing: bad) }
        }
    }
}
