import BlueZKitTesting
import Foundation
import TestSupport
import Testing
import UARTProfile

/// uart-bridge against the simulated BlueZ, judged by its `--json` output and by what a
/// simulated central sees: the echo of frames written without response.
@Suite(.serialized, .timeLimit(.minutes(5))) struct UARTBridgeExampleTests {
    static let service = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static let rx = "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"
    static let tx = "6E400003-B5A3-F393-E0A9-E50E24DCCA9E"

    @Test(.timeLimit(.minutes(1))) func thePeripheralEchoesEveryWriteAsANotification() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let program = try ExampleProgram(
            "uart-bridge", ["peripheral", "--json", "--name", "Sim UART"], busAddress: bluez.busAddress)
        try await program.waitForEvents("advertising")
        // A channel where the kernel has Bluetooth sockets; GATT alone where it has none.
        #expect(program.events("l2capPublished").count + program.events("l2capUnavailable").count == 1)
        let advertisement = try #require(bluez.adapters.first?.registeredAdvertisements.first)
        #expect(advertisement.localName == "Sim UART")
        #expect(advertisement.serviceUUIDs.map { $0.uppercased() } == [Self.service])

        let central = try bluez.addCentral(address: "11:22:33:44:55:66", mtu: 104)
        var echoes = try await central.subscribe(serviceUUID: Self.service, characteristicUUID: Self.tx)
            .makeAsyncIterator()
        try await program.waitForEvents("subscribed")
        // 1,000 bytes in frames of 100 (the MTU's 101, less): writes without response, and one
        // with response, which RX takes too.
        let pattern = TestPattern(seed: 7)
        var chunker = PatternChunker(pattern: pattern, total: 1000)
        var written = 0
        while let frame = chunker.nextFrame(maximumLength: 100) {
            try await central.write(
                serviceUUID: Self.service, characteristicUUID: Self.rx, value: Array(frame),
                type: written == 3 ? .request : .command)
            written += frame.count
        }
        var verifier = FrameVerifier(pattern: pattern, expected: 1000)
        while verifier.status == .incomplete, let echo = await echoes.next() { verifier.consume(Data(echo)) }
        #expect(verifier.status == .complete)
        #expect(verifier.frames == 11)  // 10 of 96 bytes and one of 40: each came back whole

        try await central.unsubscribe(serviceUUID: Self.service, characteristicUUID: Self.tx)
        let session = try #require(try await program.waitForEvents("unsubscribed").first)
        #expect(session["received"] as? Int == written && session["echoed"] as? Int == written)
        #expect(try await program.stop() == 0)
        #expect(program.events("error").isEmpty, "\(program.diagnostics())")
    }

    @Test func theBridgeRefusesBadArguments() async throws {
        for arguments in [
            [], ["central", "--mode", "serial"], ["peripheral", "--bytes", "10"], ["central", "--chunk", "2"],
        ] {
            let program = try ExampleProgram("uart-bridge", arguments, busAddress: "unix:path=/nonexistent")
            try await pollUntil("uart-bridge \(arguments) exited") { program.status != nil }
            #expect(program.status == 2, "\(arguments)")
            #expect(program.standardError.contains("usage: uart-bridge"))
        }
    }
}
