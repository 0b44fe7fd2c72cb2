import BlueZKit
import BlueZKitTesting
import Dispatch
import Synchronization
import Testing

/// `peripheralDidUpdateName` follows BlueZ's `Device1.Name`.
@Suite struct PeripheralNameTests {
    final class Names: PeripheralDelegate, @unchecked Sendable {
        let names = Mutex<[String]>([])
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
        sensor.name = "HRM 2"
        try await waitUntil("renamed") {
            sensor.advertise()
            return delegate.names.withLock { $0 } == ["HRM 2"]
        }
        #expect(peripheral.name == "HRM 2")
    }
}
