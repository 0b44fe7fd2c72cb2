import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Connections across bluetoothd restarts and adapter power cycles (issue 7), on the simulator.
@Suite(.timeLimit(.minutes(5))) struct CentralSurvivalTests {
    /// Connects again whenever a link drops, the door-lock pattern, and logs everything in order.
    final class DoorLockDelegate: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.door-lock")
        let log = PosixMutex<[String]>([])
        func centralManagerDidUpdateState(_ central: CentralManager) {
            let state = central.state
            log.withLock { $0.append("state \(state)") }
        }
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            log.withLock { $0.append("connected") }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
        ) {
            let code = (error as? BluetoothError).map { "\($0.code)" } ?? "nil"
            log.withLock { $0.append("disconnected \(code)") }
            central.connect(peripheral)
        }
        var events: [String] { log.withLock { $0 } }
    }

    static func connected() async throws -> (
        SimulatedBlueZ, CentralManager, DoorLockDelegate, SimulatedPeripheral, Peripheral
    ) {
        let bluez = try await SimulatedBlueZ.start()
        let sensor = CentralManagerScanTests.heartRateSensor()
        try bluez.addPeripheral(sensor)
        let delegate = DoorLockDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let peripheral = try await firstDiscovery(central, scanningFor: [BluetoothUUID(0x180D)], advertising: sensor)
        central.connect(peripheral)
        try await waitUntil("connected") { delegate.events.contains("connected") }
        return (bluez, central, delegate, sensor, peripheral)
    }

    @Test func aLinkLostToABluetoothdRestartIsReportedAndTheNewRequestCompletes() async throws {
        let (bluez, central, delegate, sensor, peripheral) = try await Self.connected()
        defer { bluez.stop() }
        try await bluez.restart(downtime: .milliseconds(200))
        // The link is reported lost before the state leaves poweredOn, so the delegate's
        // connect is accepted and stays pending through the restart.
        try await waitUntil("resetting") { delegate.events.contains("state resetting") }
        let events = delegate.events
        let lost = try #require(events.firstIndex(of: "disconnected peripheralDisconnected"))
        #expect(lost < events.firstIndex(of: "state resetting")!)
        try await waitUntil("back on") { central.state == .poweredOn }
        // The request is pending (or already done: the background discovery finds the sensor fast).
        #expect(peripheral.state == .connecting || peripheral.state == .connected)
        try await waitUntil("connected again once the sensor is seen") {
            sensor.advertise()
            return delegate.events.filter { $0 == "connected" }.count == 2
        }
        #expect(peripheral.state == .connected)
    }

    @Test func aPendingRequestSurvivesAnAdapterPowerCycle() async throws {
        let (bluez, central, delegate, sensor, peripheral) = try await Self.connected()
        defer { withExtendedLifetime(central) { bluez.stop() } }
        sensor.setInRange(false)
        try await waitUntil("link lost") { delegate.events.contains("disconnected peripheralDisconnected") }
        try await waitUntil("pending") { peripheral.state == .connecting }
        bluez.adapters[0].setPowered(false)
        try await waitUntil("powered off") { delegate.events.contains("state poweredOff") }
        bluez.adapters[0].setPowered(true)
        try await waitUntil("powered on again") { delegate.events.last == "state poweredOn" }
        #expect(peripheral.state == .connecting, "the request is still pending")
        sensor.setInRange(true)
        try await waitUntil("connected when the sensor returns", timeout: .seconds(40)) {
            sensor.advertise()
            return delegate.events.filter { $0 == "connected" }.count == 2
        }
    }

    /// The central's adapter unplugged under a link and plugged back (the same name and
    /// address): the delegate's new request stays pending while the adapter is missing and
    /// completes once the sensor advertises again, as with the real bluetoothd
    /// (`removingTheCentralsAdapterEndsTheLinkAndItsReturnCompletesTheRequest`, Bumble).
    @Test func aPendingRequestCompletesWhenTheCentralsAdapterIsPluggedBack() async throws {
        let (bluez, central, delegate, sensor, peripheral) = try await Self.connected()
        defer { withExtendedLifetime(central) { bluez.stop() } }
        let adapter = try #require(bluez.adapters.first)
        bluez.removeAdapter(adapter)
        try await waitUntil("unsupported without its adapter") { central.state == .unsupported }
        let events = delegate.events
        let lost = try #require(events.firstIndex { $0.hasPrefix("disconnected") }, "\(events)")
        #expect(lost < events.firstIndex(of: "state unsupported")!, "\(events)")
        #expect(peripheral.state == .connecting, "the delegate's new request is pending")
        let replugged = try bluez.addAdapter(.init(name: adapter.name, address: adapter.address))
        try await waitUntil("powered on again") { central.state == .poweredOn }
        try await waitUntil("connected once the sensor advertises again", timeout: .seconds(10)) {
            sensor.advertise()
            return delegate.events.filter { $0 == "connected" }.count == 2
        }
        #expect(peripheral.state == .connected)
        #expect(replugged.isPresent)
    }
}

/// iOS 17's EnableAutoReconnect, on the simulator.
@Suite(.timeLimit(.minutes(5))) struct CentralAutoReconnectTests {
    final class Recorder: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.auto-reconnect")
        let log = PosixMutex<[String]>([])
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            log.withLock { $0.append("connected") }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: Double,
            isReconnecting: Bool, error: (any Error)?
        ) {
            let state = peripheral.state
            let recent = abs(Date().timeIntervalSinceReferenceDate - timestamp) < 60
            log.withLock { $0.append("disconnected reconnecting=\(isReconnecting) \(state) recent=\(recent)") }
        }
        var events: [String] { log.withLock { $0 } }
    }

    @Test func aLostLinkComesBackByItselfWithEnableAutoReconnect() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = CentralManagerScanTests.heartRateSensor()
        try bluez.addPeripheral(sensor)
        let delegate = Recorder()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let peripheral = try await firstDiscovery(central, scanningFor: nil, advertising: sensor)
        central.connect(peripheral, options: [CBConnectPeripheralOptionEnableAutoReconnect: true])
        try await waitUntil("connected") { delegate.events == ["connected"] }
        sensor.dropConnection()
        try await waitUntil("reconnected without being asked") { delegate.events.count == 3 }
        #expect(delegate.events == ["connected", "disconnected reconnecting=true connecting recent=true", "connected"])
        // Cancelling ends it for good: a plain disconnect, not reconnecting.
        central.cancelPeripheralConnection(peripheral)
        try await waitUntil("cancelled") { delegate.events.count == 4 }
        #expect(delegate.events.last == "disconnected reconnecting=false disconnected recent=true")
    }
}

/// A scan interrupted by bluetoothd or the adapter resumes when they are back.
@Suite(.timeLimit(.minutes(5))) struct CentralScanSurvivalTests {
    @Test func aRunningScanResumesAfterBluetoothdRestartsAndAfterAPowerCycle() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let sensor = CentralManagerScanTests.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(
            withServices: [BluetoothUUID(0x180D)], options: ScanOptions(allowDuplicates: true))
        try await waitUntil("discovered") {
            sensor.advertise()
            return fixture.delegate.discoveries.count >= 1
        }
        try await fixture.bluez.restart(downtime: .milliseconds(100))
        try await waitUntil("scanning again after the restart") {
            fixture.central.isScanning && fixture.bluez.adapters.first?.isDiscovering == true
        }
        let before = fixture.delegate.discoveries.count
        try await waitUntil("discoveries continue") {
            sensor.advertise()
            return fixture.delegate.discoveries.count > before
        }
        fixture.bluez.adapters[0].setPowered(false)
        try await waitUntil("off") { fixture.central.state == .poweredOff }
        #expect(!fixture.central.isScanning)
        fixture.bluez.adapters[0].setPowered(true)
        try await waitUntil("scanning again after the power cycle") {
            fixture.central.isScanning && fixture.bluez.adapters.first?.isDiscovering == true
        }
        // stopScan while away cancels the resumption.
        fixture.central.stopScan()
        try await waitUntil("stopped") { fixture.bluez.adapters.first?.isDiscovering == false }
        fixture.bluez.adapters[0].setPowered(false)
        try await waitUntil("off again") { fixture.central.state == .poweredOff }
        fixture.bluez.adapters[0].setPowered(true)
        try await waitUntil("on again") { fixture.central.state == .poweredOn }
        #expect(!fixture.central.isScanning)
    }
}
