import DBus
import TestSupport
public import Testing

/// `Device1.Connect` to a connectable LE device that answers: the `Connected` property and its
/// `PropertiesChanged` signal.
///
/// bluetoothd learns of the link twice: its ATT socket connects (`att_connect_cb` sets the LE
/// bearer connected, WITHOUT a signal, and answers the `Connect` at once) and MGMT's Device
/// Connected event arrives (`device_add_connection`, which signals `Connected`, unless the bearer
/// is already connected: then it only logs "Device … is already connected"). Which comes first is
/// a race. In the guest the ATT socket won in 5 of 7 runs (5.66 twice, 5.82 twice, 5.87 once: no
/// `PropertiesChanged` for it at all; `Connected` is next signalled when the link goes down); the
/// kernel's event won once on 5.82 and once on 5.87 (both right after the Bumble adapter-removal
/// test), and its signal came before the reply. So: `Connected` reads true once the reply
/// is in, and its signal comes before the reply or never, never after. A client must take the
/// reply as the link being up. The simulator leaves the signal out by default, the usual outcome
/// and the one that catches a client waiting for it (`SimulatedBlueZ.Options.omitsConnectedSignal`;
/// its other setting plays the race's other outcome).
///
/// README rows: "the simulator drifting from the real bluetoothd" (Faults and bad input), and
/// `didConnect` following the `Connect` reply (What is proven where).
public enum ConnectConformance {
    /// How long after the reply the body waits for a late `Connected` signal.
    public static let signalWait: Duration = .seconds(5)

    /// Where the `Connected` = true signal came, seen from the client.
    public enum SignalTime: String, Sendable {
        case beforeReply = "before the reply"
        case afterReply = "after the reply"
        case never = "never"
    }

    /// Discovers `peer`, connects, checks the property and that no `Connected` signal came in
    /// the ``signalWait`` after the reply, disconnects, forgets it; returns when the signal came.
    @discardableResult
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> SignalTime {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.connect")
        defer { client.close() }
        let path = bluetoothd.devicePath(try await peer.address)
        try await client.forgetDevice(path, on: bluetoothd)
        try await client.discover(path, on: bluetoothd) { try await peer.startAdvertising() }
        let connectedBefore = await client.property(path, "org.bluez.Device1", "Connected")
        #expect(
            connectedBefore == .bool(false),
            "\(bluetoothd): Connected before Connect is \(String(describing: connectedBefore))",
            sourceLocation: sourceLocation)

        let mark = client.mark
        try await client.call(path, "org.bluez.Device1", "Connect", timeout: TestTime.scaled(.seconds(60)))
        // The signals that reached us before the reply (one connection: the bus keeps bluetoothd's order).
        let atReply = client.signals(since: mark)
        let connected = await client.property(path, "org.bluez.Device1", "Connected")
        let isConnectedSignal = { (signal: BusSignal) in
            signal.changes(path, "org.bluez.Device1", "Connected", to: .bool(true))
        }
        let time: SignalTime
        if atReply.contains(where: isConnectedSignal) {
            time = .beforeReply
        } else if try await BlueZCalls.holds(
            within: signalWait, { client.signals(since: mark).contains(where: isConnectedSignal) })
        {
            time = .afterReply
        } else {
            time = .never
        }
        print("\(bluetoothd): Connected read \(String(describing: connected)) at the reply; signal \(time.rawValue)")
        #expect(
            connected == .bool(true), "\(bluetoothd): Connected is \(String(describing: connected)) after the reply",
            sourceLocation: sourceLocation)
        #expect(
            time != .afterReply,
            "\(bluetoothd): PropertiesChanged Connected=true came \(time.rawValue); signals: \(client.signals(since: mark))",
            sourceLocation: sourceLocation)

        _ = await client.error(path, "org.bluez.Device1", "Disconnect")
        try await client.waitForProperty(path, "org.bluez.Device1", "Connected", toBe: .bool(false))
        try await client.forgetDevice(path, on: bluetoothd)
        return time
    }
}
