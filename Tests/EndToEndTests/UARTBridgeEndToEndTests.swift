import Foundation
import TestSupport
import Testing

/// The UART bridge example on the real bluetoothd: `uart-bridge peripheral` on hci1 echoes what
/// `uart-bridge central` on hci0 sends, through GATT and through an L2CAP channel, and the
/// central finds every byte back. In the serialized end-to-end suite: both use hci0 and hci1.
extension EndToEndTests {
    static let uartBytes = 65_536

    /// Writes without response to RX, echoed as TX notifications; flow control on both sides,
    /// frames put back in order where bluetoothd's EATT bearers reordered them.
    @Test(.loadScaledTimeLimit(minutes: 4)) func uartBridgeEchoesThroughGATT() async throws {
        let (central, peripheral) = try await runUARTBridge(mode: "gatt")
        let result = try #require(central.events("result").first)
        let frames = try #require(result["frames"] as? Int)
        #expect(frames >= Self.uartBytes / 510)
        #expect((0...frames).contains(result["framesOutOfOrder"] as? Int ?? -1))
        // The peripheral echoed exactly what it received: the pattern plus a header per frame.
        let session = try await peripheral.waitForEvents("unsubscribed", timeout: .seconds(30))
        #expect(session.first?["received"] as? Int == Self.uartBytes + 4 * frames, "\(peripheral.diagnostics())")
        #expect(session.first?["echoed"] as? Int == session.first?["received"] as? Int)
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        #expect(peripheral.events("error").isEmpty)
    }

    /// The PSM read from Apple's PSM characteristic, the pattern through the channel and back.
    @Test(.loadScaledTimeLimit(minutes: 4)) func uartBridgeEchoesThroughL2CAP() async throws {
        let (central, peripheral) = try await runUARTBridge(mode: "l2cap")
        let psm = try #require(central.events("psm").first?["psm"] as? Int)
        #expect(peripheral.events("l2capPublished").first?["psm"] as? Int == psm)
        let closed = try await peripheral.waitForEvents("channelClosed", timeout: .seconds(30))
        #expect(closed.first?["echoed"] as? Int == Self.uartBytes, "\(peripheral.diagnostics())")
        #expect(closed.first?["error"] == nil)
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        #expect(peripheral.events("error").isEmpty)
    }

    /// Starts the peripheral on hci1 and a central on hci0 in `mode`, waits for the central's
    /// verdict and checks it: exit status 0, every byte back intact, a throughput.
    private func runUARTBridge(mode: String) async throws -> (central: ExampleProgram, peripheral: ExampleProgram) {
        try await ExamplePeripheral.forgetKnownDevices()
        let peripheral = try ExampleProgram(
            "uart-bridge", ["peripheral", "--json", "--adapter", "hci1", "--name", "E2E UART"], busAddress: nil)
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        let central = try ExampleProgram(
            "uart-bridge",
            [
                "central", "--json", "--adapter", "hci0", "--name", "E2E UART", "--mode", mode, "--bytes",
                "\(Self.uartBytes)", "--timeout", "30",
            ],
            busAddress: nil)
        try await central.waitForEvents("connected", timeout: .seconds(60))
        let results = try await central.waitForEvents("result", timeout: .seconds(120))
        try await pollUntil("the central exits after its transfer", timeout: .seconds(30)) { central.status != nil }
        #expect(central.status == 0, "\(central.diagnostics())")
        #expect(central.events("error").isEmpty, "\(central.diagnostics())")
        let result = try #require(results.first)
        #expect(result["mode"] as? String == mode)
        #expect(result["intact"] as? Bool == true)
        #expect(result["bytes"] as? Int == Self.uartBytes)
        #expect((result["bytesPerSecond"] as? Int ?? 0) > 0)
        print("uart-bridge \(mode): \(result)")
        return (central, peripheral)
    }
}
