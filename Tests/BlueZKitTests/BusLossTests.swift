import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// The system bus restarting (issue 18): the managers go `.resetting`, connect to the new bus by
/// themselves and recover as after a bluetoothd restart; a bus missing at start is waited for.
@Suite(.timeLimit(.minutes(2)))
struct BusLossTests {
    @Test func aCentralSurvivesTheBusRestartingAndItsRequestCompletes() async throws {
        let (bluez, central, delegate, sensor, peripheral) = try await CentralSurvivalTests.connected()
        defer { withExtendedLifetime(central) { bluez.stop() } }
        try await bluez.restartBus(downtime: .milliseconds(300))
        // Before: the state stayed poweredOn and the link was never reported lost.
        try await waitUntil("resetting") { delegate.events.contains("state resetting") }
        try await waitUntil("the link is reported lost") {
            delegate.events.contains("disconnected peripheralDisconnected")
        }
        try await waitUntil("back on the new bus") { central.state == .poweredOn }
        // The delegate asked to connect again when the link was lost: the request completes.
        try await waitUntil("connected again once the sensor is seen") {
            sensor.advertise()
            return delegate.events.filter { $0 == "connected" }.count == 2
        }
        #expect(peripheral.state == .connected)
    }

    @Test func aScanRunningWhenTheBusRestartsGoesOn() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let sensor = CentralManagerScanTests.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(
            withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        try await waitUntil("discovered") {
            sensor.advertise()
            return !fixture.delegate.discoveries.isEmpty
        }
        try await fixture.bluez.restartBus()
        try await waitUntil("resetting") { fixture.central.state == .resetting }
        try await waitUntil("powered on again") { fixture.central.state == .poweredOn }
        // The new bluetoothd discovers only for the scan resumed on the new bus.
        let before = fixture.delegate.discoveries.count
        try await waitUntil("discovered on the new bus") {
            sensor.advertise()
            return fixture.delegate.discoveries.count > before
        }
        #expect(fixture.central.isScanning)
    }

    @Test func servicesAndAdvertisingComeBackAfterTheBusRestarts() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, _) = try await PeripheralManagerSurvivalTests.published(bluez)
        try await bluez.restartBus(downtime: .milliseconds(200))
        try await waitUntil("resetting") { manager.state == .resetting }
        // Before: nothing noticed, and nothing was registered on the new bus.
        try await waitUntil("registered again on the new bus") {
            bluez.adapters.first?.registeredApplications.count == 1
                && bluez.adapters.first?.registeredAdvertisements.first?.localName == "HRM"
        }
        #expect(manager.state == .poweredOn)
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
    }

    @Test func updateValueIsRefusedWhileTheBusIsAway() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let delegate = PeripheralManagerSurvivalTests.Quiet()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue,
            options: PeripheralManagerOptions(adapter: "hci0", busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0x2A37), properties: [.notify], value: nil, permissions: [.readable])
        let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
        service.characteristics = [characteristic]
        manager.add(service)
        try await waitUntil("published and accepting updates") {
            bluez.adapters.first?.registeredApplications.count == 1
                && manager.updateValue(Data([0, 60]), for: characteristic, onSubscribedCentrals: nil)
        }
        let restart = Task { try await bluez.restartBus(downtime: .seconds(2)) }
        try await waitUntil("resetting") { manager.state == .resetting }
        // Before: true, and the value was dropped.
        #expect(!manager.updateValue(Data([0, 61]), for: characteristic, onSubscribedCentrals: nil))
        try await restart.value
        // Accepted again once the services are published on the new bus.
        try await waitUntil("published again and accepting updates") {
            bluez.adapters.first?.registeredApplications.count == 1
                && manager.updateValue(Data([0, 62]), for: characteristic, onSubscribedCentrals: nil)
        }
    }

    @Test func aBusMissingAtStartIsWaitedFor() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let address = bluez.busAddress
        let restart = Task { try await bluez.restartBus(downtime: .seconds(2)) }
        // Wait until nothing listens (the simulated bluetoothd's name is gone with the bus).
        try await waitUntil("the bus is down") { !FileManager.default.fileExists(atPath: Self.socketPath(address)) }
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: address))
        // Before: .unsupported for good.
        try await waitUntil("resetting while the bus is missing") { central.state == .resetting }
        try await restart.value
        try await waitUntil("powered on once the bus is there") { central.state == .poweredOn }
    }

    /// The socket path of a `unix:path=…` address.
    static func socketPath(_ address: String) -> String {
        let path = address.split(separator: ",").first.map(String.init) ?? address
        return String(path.dropFirst("unix:path=".count))
    }
}

/// A registration that bluetoothd never answered because it left (issue 18's recovery).
@Suite(.timeLimit(.minutes(1)))
struct InterruptedRegistrationTests {
    final class AddRecorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.interrupted-registration")
        let added = PosixMutex<[String]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            added.withLock { $0.append(error.map { "failed: \($0)" } ?? "added") }
        }
    }

    @Test func aServiceWhoseRegistrationBluetoothdLeftUnansweredIsPublishedWhenItIsBack() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let delegate = AddRecorder()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue,
            options: PeripheralManagerOptions(adapter: "hci0", busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        bluez.inject(.noReply, for: PeripheralManagerCleanupTests.registerApplication)
        let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x01]), permissions: [.readable])
        ]
        manager.add(service)
        try await waitUntil("bluetoothd holds the registration unanswered") { bluez.unfiredFaultCount == 0 }
        try await bluez.restart(downtime: .milliseconds(100))
        // Before: didAdd failed with NoReply and the service was dropped for good.
        try await waitUntil("reported added") { !delegate.added.withLock { $0 }.isEmpty }
        #expect(delegate.added.withLock { $0 } == ["added"])
        try await waitUntil("published on the restarted bluetoothd") {
            bluez.adapters.first?.registeredApplications.count == 1
        }
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
    }
}
