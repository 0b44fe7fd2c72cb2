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

    /// A background start that bluetoothd answers after the client's 5 s limit took effect all
    /// the same (bluetoothd registers the session when the call arrives): the engine stops it,
    /// asking again while bluetoothd answers InProgress (`stop_discovery` refuses a session whose
    /// start is unanswered). Before 60e5d5c the failed start was taken as not started, and
    /// nothing stopped the discovery once the connection no longer needed it: what CI's TSan run
    /// showed in `waitsForAPeripheralThatIsAwayAndConnectsWhenItReturns`.
    @Test func aBackgroundStartAnsweredAfterTheCallsLimitIsStopped() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await CentralManagerConnectTests.discoverSensor(fixture)
        try await waitUntil("the first scan stopped") { fixture.bluez.adapters.first?.isDiscovering == false }
        sensor.setInRange(false)
        #expect(fixture.bluez.removeDevice(sensor))

        fixture.bluez.inject(.delay(.seconds(7)), for: .startDiscovery)
        fixture.central.connect(peripheral)
        try await waitUntil("the background session registered") {
            fixture.bluez.adapters.first?.discoverySessionCount == 1
        }
        // No connection needs a discovery any more; the stop this asks for waits behind the start.
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("cancelled") { peripheral.state == .disconnected }

        try await pollUntil(
            "the late-started discovery stops", timeout: .seconds(20),
            diagnostics: {
                let adapter = fixture.bluez.adapters.first
                return "discovering: \(String(describing: adapter?.isDiscovering)), "
                    + "sessions: \(String(describing: adapter?.discoverySessionCount))"
            },
            {
                // The session (registered at once, kept until a stop succeeds) is gone, and with it the scan.
                fixture.bluez.adapters.first?.discoverySessionCount == 0
                    && fixture.bluez.adapters.first?.isDiscovering == false
            })
    }
}
