import DBus
import TestSupport
public import Testing

/// `Device1.Connect` to an LE device that went silent.
///
/// The kernel gives up the LE connection attempt (about 40 s on the real controllers; the
/// simulator's fast timing is quicker) and bluetoothd answers `org.bluez.Error.Failed` with the
/// reason `le-connection-abort-by-local` (`src/device.c`, `bonding_request`/`le_connect_cb` via
/// `btd_error_le_errno`); the device stays disconnected. Whether its `Device1` stays depends on
/// the kernel: Linux 6.1 (Debian 12) ends the attempt without a management event, so the
/// discovered (temporary) device stays with `Connected` false; Linux 6.12 (Debian 13) sends
/// `Connect Failed` (status 0x0e, Disconnected) when the attempt times out, and bluetoothd removes
/// a temporary device on that event (`src/adapter.c`, `connect_failed_callback`). Either way it is
/// not connected: it is gone (an `InterfacesRemoved` of its `Device1` after the call) or it says
/// `Connected` false.
public enum DeviceConformance {
    /// The error a body expects.
    public static let expectedError = "org.bluez.Error.Failed"
    /// Its message.
    public static let expectedMessage = "le-connection-abort-by-local"

    /// Discovers `peer`, makes it silent, connects, and checks the error and `Connected`.
    /// `connectTimeout` bounds the `Connect` call (the real one takes about 42 s).
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer, connectTimeout: Duration = .seconds(90),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.device")
        defer { client.close() }
        let path = bluetoothd.devicePath(try await peer.address)
        try await client.forgetDevice(path, on: bluetoothd)
        try await client.discover(path, on: bluetoothd) { try await peer.startAdvertising() }
        try await peer.goSilent()

        let mark = client.mark
        let error = await client.error(
            path, "org.bluez.Device1", "Connect", timeout: TestTime.scaled(connectTimeout))
        #expect(
            error?.name == expectedError, "\(bluetoothd): \(String(describing: error))", sourceLocation: sourceLocation)
        #expect(
            error?.message == expectedMessage, "\(bluetoothd): \(String(describing: error))",
            sourceLocation: sourceLocation)
        if let connected = await client.property(path, "org.bluez.Device1", "Connected") {
            #expect(
                connected == .bool(false), "\(bluetoothd): Connected is \(connected)", sourceLocation: sourceLocation)
        } else {
            let removed = client.signals(since: mark).contains {
                $0.member == "InterfacesRemoved" && $0.objectPath == path
                    && $0.removedInterfaces.contains("org.bluez.Device1")
            }
            let exported = try await client.exists(path)
            #expect(
                removed && !exported,
                "\(bluetoothd): no Connected; InterfacesRemoved of its Device1 \(removed), exported \(exported)",
                sourceLocation: sourceLocation)
        }
        try await client.forgetDevice(path, on: bluetoothd)
    }
}
