import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// The discovery a central runs by itself for a pending connection to a device bluetoothd has
/// forgotten: it stops once no connection needs it.
@Suite(.timeLimit(.minutes(2))) struct CentralBackgroundDiscoveryTests {
    /// A background start that finds our discovery still running (bluetoothd answers
    /// `StartDiscovery` with InProgress: the client's session exists) is running, not failed.
    /// Seen under ThreadSanitizer in `waitsForAPeripheralThatIsAwayAndConnectsWhenItReturns`: a
    /// `stopScan()` queued behind a slow start handed over to the background discovery without
    /// stopping the session, the background starts got InProgress and were taken as failed, and
    /// the discovery ran on after the connection (two "InProgress" warnings in the log).
    @Test func aBackgroundDiscoveryThatFindsTheScansSessionStopsAfterTheConnection() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await CentralManagerConnectTests.discoverSensor(fixture)
        try await waitUntil("the first scan stopped") { fixture.bluez.adapters.first?.isDiscovering == false }

        // A scan whose start bluetoothd answers late, and a stop queued behind it: the stop
        // runs only after the connection below wanted a background discovery.
        fixture.bluez.inject(.delay(.milliseconds(500)), for: .startDiscovery)
        fixture.central.scanForPeripherals(withServices: nil)
        fixture.central.stopScan()
        sensor.setInRange(false)
        #expect(fixture.bluez.removeDevice(sensor))
        fixture.central.connect(peripheral)
        try await waitUntil("connecting") { peripheral.state == .connecting }
        try await waitUntil("a discovery runs for the connection") {
            fixture.bluez.adapters.first?.isDiscovering == true
        }

        sensor.setInRange(true)
        sensor.advertise()
        try await waitUntil("connected once it is back") { peripheral.state == .connected }
        try await pollUntil(
            "the background discovery stops", timeout: .seconds(10),
            diagnostics: { "discovering: \(String(describing: fixture.bluez.adapters.first?.isDiscovering))" },
            { fixture.bluez.adapters.first?.isDiscovering == false })
    }
}
