import DBus
import TestSupport
public import Testing

/// `Device1.Connect` to an LE device that went silent.
///
/// The kernel gives up the LE connection attempt (about 40 s on the real controllers; the
/// simulator's fast timing is quicker) and bluetoothd answers `org.bluez.Error.Failed` with the
/// reason `le-connection-abort-by-local` (`src/device.c`, `bonding_request`/`le_connect_cb` via
/// `btd_error_le_errno`); the device stays disconnected.
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

        let error = await client.error(
            path, "org.bluez.Device1", "Connect", timeout: TestTime.scaled(connectTimeout))
        #expect(
            error?.name == expectedError, "\(bluetoothd): \(String(describing: error))", sourceLocation: sourceLocation)
        #expect(
            error?.message == expectedMessage, "\(bluetoothd): \(String(describing: error))",
            sourceLocation: sourceLocation)
        let connected = await client.property(path, "org.bluez.Device1", "Connected")
        #expect(
            connected == .bool(false), "\(bluetoothd): Connected is \(String(describing: connected))",
            sourceLocation: sourceLocation)
        try await client.forgetDevice(path, on: bluetoothd)
    }
}
