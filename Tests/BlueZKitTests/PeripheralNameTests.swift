import BlueZKit
import BlueZKitTesting
import Dispatch
import Locking
import TestSupport
import Testing

/// `peripheralDidUpdateName` follows BlueZ's `Device1.Name`.
@Suite(.timeLimit(.minutes(5))) struct PeripheralNameTests {
    final class Names: PeripheralDelegate, @unchecked Sendable {
        let names = PosixMutex<[String]>([])
        func peripheralDidUpdateName(_ peripheral: Peripheral) {
            let name = peripheral.name ?? "nil"
            names.withLock { $0.append(name) }
        }
    }

    @Test func aNewNameIsReported() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let (sensor, peripheral) = try await CentralManagerConnectTests.discoverSensor(fixture)
        let delegate = Names()
        peripheral.delegate = delegate
        #expect(peripheral.name == "HRM")
        fixture.central.scanForPeripherals(withServices: nil)
        // The previous scan's stop and this start are queued one after the other: wait for it.
        try await waitUntil("discovering", timeout: .seconds(30)) {
            fixture.bluez.adapters.first?.isDiscovering == true
        }
        sensor.name = "HRM 2"
        try await waitUntil("renamed", timeout: .seconds(30)) {
            sensor.advertise()
            return delegate.names.withLock { $0 }.contains("HRM 2")
        }
        #expect(delegate.names.withLock { $0 } == ["HRM 2"], "reported once")
        #expect(peripheral.name == "HRM 2")
    }

    /// Core Bluetooth's `name` is nil for a device that gave none; bluetoothd's `Alias` then is the
    /// address with dashes ("C0-FF-EE-00-00-31"), which code that hides unnamed devices would show.
    @Test func aDeviceWithoutANameHasNoName() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let beacon = SimulatedPeripheral(address: "C0:FF:EE:00:00:31", serviceUUIDs: ["FEAA"])
        try fixture.bluez.addPeripheral(beacon)
        let peripheral = try await firstDiscovery(fixture.central, scanningFor: nil, advertising: beacon)
        #expect(peripheral.name == nil)
    }
}
