import Foundation
import TestSupport
import Testing
import UARTProfile

/// README row "UART bridge, both roles, with Bumble": each role of the UART bridge example
/// (`uart-bridge`) on the Bumble-backed adapter against a Nordic UART Service peer on Google
/// Bumble's stack, so that the other end of the link is neither BlueZ nor ours:
/// `Scripts/guest/bumble_uart_client.py` (a NUS central) judges `uart-bridge peripheral`, and
/// `Scripts/guest/bumble_uart_echo_server.py` (a NUS echo server) judges `uart-bridge central`.
/// In the serialized end-to-end suite.
extension EndToEndTests {
    /// Bumble's NUS central subscribes to TX and writes three messages to RX, each as Bumble sends
    /// it — a Write Command, a Write Request of a whole PDU (20 bytes at ATT MTU 23) and a
    /// 300-byte long write (17 Prepare Writes and an Execute Write) — waiting for each echo before
    /// the next. Our peripheral echoes every message exactly, the long one in TX notifications
    /// of 20 bytes (`maximumUpdateValueLength` at MTU 23), and counts as many bytes echoed as
    /// received.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func bumblesUARTClientAgainstOurBridgesPeripheral() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let messages: [(kind: String, value: Data)] = [
            ("command", Data("hello, UART".utf8)),
            ("request", Data((0..<20).map { UInt8(0xA0 + $0) })),
            ("long", Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })),
        ]
        let client = try BumblePeer.start(
            "bumble_uart_client.py",
            messages.flatMap { ["--write", "\($0.kind):\($0.value.uartHex)"] } + ["--timeout", "170"])
        try await client.waitForEvents("scanning", timeout: .seconds(90))
        let peripheral = try ExampleProgram(
            "uart-bridge", ["peripheral", "--json", "--adapter", adapter, "--name", "Judged UART"], busAddress: nil)
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        try await pollUntil("Bumble's client exits", timeout: .seconds(150), diagnostics: client.diagnostics) {
            client.status != nil
        }
        #expect(client.status == 0, "\(client.diagnostics())\n\(peripheral.diagnostics())")
        #expect(client.events("error").isEmpty)
        #expect(client.events("mtu").first?["mtu"] as? Int == 23, "\(client.diagnostics())")

        let echoes = client.events("echo")
        #expect(echoes.map { $0["kind"] as? String } == messages.map(\.kind), "\(client.diagnostics())")
        for (echo, message) in zip(echoes, messages) {
            #expect(echo["sent"] as? String == message.value.uartHex)
            #expect(echo["received"] as? String == message.value.uartHex, "the \(message.kind) came back changed")
        }
        let long = try #require(echoes.last)
        #expect(long["parts"] as? Int == 17, "300 bytes in Prepare Writes of 18")
        #expect(long["notifications"] as? Int == 15, "echoed in notifications of 20 bytes")

        let total = messages.map(\.value.count).reduce(0, +)
        let session = try await peripheral.waitForEvents("unsubscribed", timeout: .seconds(30))
        #expect(session.first?["received"] as? Int == total, "\(peripheral.diagnostics())")
        #expect(session.first?["echoed"] as? Int == total)
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        #expect(peripheral.events("error").isEmpty)
    }

    /// `uart-bridge central --mode gatt` against Bumble's NUS echo server, on a link of ATT MTU 23
    /// (Bumble's server accepts no more) and one of 517: the central writes the 4096-byte test
    /// pattern in frames of `maximumWriteValueLength(for: .withoutResponse)` (20 or 510 bytes,
    /// the frame's 4-byte offset included) and finds every byte back through TX. Bumble reports
    /// each write as it came: every frame fits the link's PDU, and the frames carry exactly the
    /// pattern at their offsets, each once. (The bridge's central writes only without response:
    /// no single write of it is longer than one ATT payload.)
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4),
        arguments: [23, 517])
    func ourBridgesCentralAgainstABumbleUARTEchoServer(mtu: Int) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let bytes = 4096
        let central = try ExampleProgram(
            "uart-bridge",
            [
                "central", "--json", "--adapter", adapter, "--name", "BZK-UART", "--mode", "gatt", "--bytes",
                "\(bytes)", "--timeout", "60",
            ],
            busAddress: nil)
        try await central.waitForEvents("scanning", timeout: .seconds(30))
        let server = try BumblePeer.start(
            "bumble_uart_echo_server.py", ["--mtu", "\(mtu)", "--name", "BZK-UART", "--timeout", "200"])
        let diagnostics = { "\(central.diagnostics())\n\(server.diagnostics())" }
        try await server.waitForEvents("advertising", timeout: .seconds(90))
        try await central.waitForEvents("connected", timeout: .seconds(60))
        let results = try await central.waitForEvents("result", timeout: .seconds(150))
        try await pollUntil("the central exits after its transfer", timeout: .seconds(30), diagnostics: diagnostics) {
            central.status != nil
        }
        #expect(central.status == 0, "\(diagnostics())")
        #expect(central.events("error").isEmpty)
        let result = try #require(results.first)
        #expect(result["mode"] as? String == "gatt")
        #expect(result["intact"] as? Bool == true)
        #expect(result["bytes"] as? Int == bytes)
        #expect(central.events("sending").first?["chunk"] as? Int == min(mtu - 3, UARTProfile.maximumWriteLength))

        // The central's subscription ended as it exited (bluetoothd writes TX's CCC back to 0000):
        // the server stops there. Not at the end of the link: the guest's kernel answered the
        // central's Device1.Disconnect without sending HCI Disconnect to the Bumble controller
        // (after that controller had confirmed an LE Create Connection Cancel of the link already
        // made; 5.82, kernel 6.1, Bumble 0.0.236), so the Bumble peripheral never heard it.
        try await pollUntil("Bumble's server exits", timeout: .seconds(60), diagnostics: diagnostics) {
            server.status != nil
        }
        #expect(server.status == 0, "\(server.diagnostics())")
        #expect(server.events("subscribed").first?["notify"] as? Bool == true)
        let writes = server.events("received").compactMap { ($0["value"] as? String).flatMap(Data.init(uartHex:)) }
        #expect(writes.allSatisfy { $0.count <= mtu - 3 }, "every write fits one PDU")
        var covered = IndexSet()
        let pattern = TestPattern()
        for write in writes {
            let frame = try #require(UARTFrame.parse(write), "a frame: \(write.uartHex)")
            let range = frame.offset..<frame.offset + frame.payload.count
            #expect(frame.payload == pattern.bytes(range), "the pattern at \(frame.offset)")
            #expect(!covered.intersects(integersIn: range), "bytes \(range) written twice")
            covered.insert(integersIn: range)
        }
        #expect(covered == IndexSet(integersIn: 0..<bytes), "Bumble received the whole pattern, each byte once")
        let totals = server.events("totals").first
        let written = writes.map(\.count).reduce(0, +)
        #expect(totals?["received"] as? Int == written, "\(server.diagnostics())")
        #expect(totals?["echoed"] as? Int == written)
    }
}

extension Data {
    /// Lowercase hexadecimal, as the Bumble peers print and take values.
    fileprivate var uartHex: String { map { String(format: "%02x", $0) }.joined() }

    /// The bytes of lowercase or uppercase hexadecimal; nil for anything else.
    fileprivate init?(uartHex text: String) {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        self.init(bytes)
    }
}
