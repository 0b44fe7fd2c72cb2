import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct CentralManagerConnectTests {
    /// Discovers the heart-rate sensor and returns its `Peripheral`.
    static func discoverSensor(_ fixture: CentralFixture) async throws -> (SimulatedPeripheral, Peripheral) {
        let sensor = CentralManagerScanTests.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        fixture.central.stopScan()
        return (sensor, try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral)
    }

    @Test func connectsAndDisconnects() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { fixture.delegate.links == ["connected HRM connected"] }
        #expect(sensor.isConnected)
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { fixture.delegate.links.count == 2 }
        #expect(fixture.delegate.links.last == "disconnected HRM nil disconnected")
        #expect(!sensor.isConnected)
        #expect(fixture.delegate.offQueueCalls == 0)
    }

    /// Core Bluetooth's `state` reads `.connecting` as soon as `connect` returns; the e2e tier
    /// under load once read `.disconnected` there (the state followed the engine's event).
    @Test func isConnectingAsSoonAsConnectReturns() async throws {
        let fixture = try await CentralFixture.make()
        let (_, peripheral) = try await Self.discoverSensor(fixture)
        fixture.central.connect(peripheral)
        #expect(peripheral.state == .connecting)
        try await waitUntil("connected") { fixture.delegate.links == ["connected HRM connected"] }
        fixture.central.connect(peripheral)
        #expect(peripheral.state == .connected, "a second connect changes nothing")
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { peripheral.state == .disconnected }
    }

    @Test func keepsRetryingThroughTransientFailures() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        fixture.bluez.inject(
            .error(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), for: .connect, count: 2)
        fixture.bluez.inject(.error(name: "org.bluez.Error.InProgress", message: "In Progress"), for: .connect)
        fixture.central.connect(peripheral)
        #expect(peripheral.state == .disconnected || peripheral.state == .connecting)
        try await waitUntil("connected after three failures") { fixture.delegate.links == ["connected HRM connected"] }
        #expect(sensor.isConnected)
    }

    @Test func waitsForAPeripheralThatIsAwayAndConnectsWhenItReturns() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        sensor.setInRange(false)
        fixture.central.connect(peripheral)
        try await waitUntil("connecting") { peripheral.state == .connecting }
        // Gone from bluetoothd's cache too: only a discovery can find it again.
        fixture.bluez.removeDevice(sensor)
        try await waitUntil("a background discovery looks for it") {
            fixture.bluez.adapters.first?.isDiscovering == true
        }
        #expect(fixture.delegate.links.isEmpty)
        sensor.setInRange(true)
        sensor.advertise()
        try await waitUntil("connected once it is back") { fixture.delegate.links == ["connected HRM connected"] }
        // Under a loaded machine one discovery call here has been seen to stall until its 5 s
        // limit (cause not found yet, see the session notes); the stop must still come.
        try await waitUntil("the background discovery stops", timeout: .seconds(30)) {
            fixture.bluez.adapters.first?.isDiscovering == false
        }
    }

    @Test func cancelsAPendingConnection() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        sensor.setInRange(false)
        fixture.central.connect(peripheral)
        try await waitUntil("connecting") { peripheral.state == .connecting }
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("cancelled") { fixture.delegate.links == ["disconnected HRM nil disconnected"] }
        sensor.setInRange(true)
        sensor.advertise()
        // A later, unrelated connect proves the cancelled request left no attempt behind.
        fixture.central.connect(peripheral)
        try await waitUntil("connected by the new request") { fixture.delegate.links.count == 2 }
        #expect(fixture.delegate.links == ["disconnected HRM nil disconnected", "connected HRM connected"])
    }

    /// A cancelled request whose `Connect` still succeeds at bluetoothd has its link taken down;
    /// a new request meanwhile must not get that link (its `Connect` succeeds at once while it
    /// is up) and then lose it to the `Disconnect`. Seen under ThreadSanitizer's timing in
    /// `cancelsAPendingConnection`: "connected", then "disconnected peripheralDisconnected".
    @Test func aNewRequestIsNotEndedByTheTeardownOfACancelledOne() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        // The request's Connect takes 2 s; it is cancelled meanwhile, and succeeds after all:
        // the cancel's Disconnect (sent at once, to stop the Connect under way) takes longer,
        // and reaches bluetoothd only after the link is up. It then takes the link down 1 s
        // later, scaled like the waits: the link is up only that long, and the poll below must
        // see it (under ThreadSanitizer, beside the whole tier in a fresh chroot, it once did not
        // within 1 s).
        fixture.bluez.inject(.delay(.seconds(2)), for: .connect)
        fixture.bluez.inject(.delay(.seconds(2) + TestTime.scaled(.seconds(1))), for: .disconnect)
        fixture.central.connect(peripheral)
        try await waitUntil("connecting") { peripheral.state == .connecting }
        // `.connecting` is reported before `Connect` is sent: a cancel before that would send none.
        try await waitUntil("its Connect reached bluetoothd") { fixture.bluez.unfiredFaultCount == 1 }
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("cancelled") { fixture.delegate.links == ["disconnected HRM nil disconnected"] }
        try await waitUntil("the cancelled request's link is up") { sensor.isConnected }
        // Its reply reaches the manager (nothing it posts tells when) before the new request.
        try await Task.sleep(for: TestTime.scaled(.milliseconds(300)))
        fixture.central.connect(peripheral)
        try await waitUntil("connected by the new request") { fixture.delegate.links.count >= 2 }
        // Longer than the Disconnect takes: a link it ended would be reported by now.
        try await Task.sleep(for: TestTime.scaled(.milliseconds(1500)))
        #expect(fixture.delegate.links == ["disconnected HRM nil disconnected", "connected HRM connected"])
        #expect(sensor.isConnected)
        #expect(peripheral.state == .connected)
    }

    @Test func reportsALostLinkWithAnError() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { fixture.delegate.links.count == 1 }
        sensor.dropConnection()
        try await waitUntil("link loss reported") { fixture.delegate.links.count == 2 }
        #expect(fixture.delegate.links.last == "disconnected HRM peripheralDisconnected disconnected")
        // The door-lock pattern: connect again in didDisconnect and wait, with no timeout.
        fixture.central.connect(peripheral)
        try await waitUntil("reconnected") { fixture.delegate.links.count == 3 }
        #expect(fixture.delegate.links.last == "connected HRM connected")
    }

    /// bluetoothd 5.83+ tells why a link ended (`Device1.Disconnected`) before `Connected` turns
    /// false: a supervision timeout is Core Bluetooth's `connectionTimeout`, a remote user's
    /// termination `peripheralDisconnected`; the reason is used once, for that loss only.
    @Test func reportsASupervisionTimeoutAsConnectionTimeout() async throws {
        let fixture = try await CentralFixture.make(options: .init(version: .bluez5_87))
        let (sensor, peripheral) = try await Self.discoverSensor(fixture)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { fixture.delegate.links.count == 1 }
        sensor.dropConnection(reason: "org.bluez.Reason.Timeout", message: "Connection timeout")
        try await waitUntil("link loss reported") { fixture.delegate.links.count == 2 }
        #expect(fixture.delegate.links.last == "disconnected HRM connectionTimeout disconnected")
        fixture.central.connect(peripheral)
        try await waitUntil("reconnected") { fixture.delegate.links.count == 3 }
        sensor.dropConnection(reason: "org.bluez.Reason.Remote", message: "Connection terminated by remote user")
        try await waitUntil("second loss reported") { fixture.delegate.links.count == 4 }
        #expect(fixture.delegate.links.last == "disconnected HRM peripheralDisconnected disconnected")
        fixture.central.connect(peripheral)
        try await waitUntil("connected again") { fixture.delegate.links.count == 5 }
        sensor.dropConnection()
        try await waitUntil("third loss reported") { fixture.delegate.links.count == 6 }
        #expect(fixture.delegate.links.last == "disconnected HRM peripheralDisconnected disconnected")
    }

    /// bluetoothd usually sends no `Connected` signal for a link made with `Connect`
    /// (`ConnectConformance`), and may when the kernel's event wins the race: one didConnect either way.
    @Test(arguments: [true, false])
    func treatsASuccessfulConnectReplyAsConnectedWithOrWithoutTheSignal(omitsSignal: Bool) async throws {
        let bluez = try await SimulatedBlueZ.start(options: .init(omitsConnectedSignal: omitsSignal))
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let fixture = CentralFixture(bluez: bluez, delegate: delegate, central: central)
        let (_, peripheral) = try await Self.discoverSensor(fixture)
        central.connect(peripheral)
        try await waitUntil("connected") { delegate.links == ["connected HRM connected"] }
        #expect(peripheral.state == .connected)
    }
}
