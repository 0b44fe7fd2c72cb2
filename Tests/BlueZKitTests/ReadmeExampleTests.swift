import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

// The complete example of the README's "Testing your app without Bluetooth" section: a small
// app (it reads where a heart-rate sensor is worn) and its test against the simulated BlueZ,
// including a fault. Keep the two in step.

/// The app under test: finds a heart-rate sensor, connects and reads Body Sensor Location.
final class SensorLocationReader: Sendable {
    let central: CentralManager

    init(busAddress: String?) {
        central = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "app"), options: CentralManagerOptions(busAddress: busAddress))
    }

    /// The location byte of the first sensor found.
    func readLocation() async throws -> UInt8 {
        let discoveries = central.discoveries()
        central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        var found = discoveries.makeAsyncIterator()
        guard let sensor = await found.next()?.peripheral else { throw CancellationError() }
        central.stopScan()
        try await central.connect(to: sensor)
        let service = try await sensor.discoverServices(matching: [BluetoothUUID(0x180D)])[0]
        let location = try await sensor.discoverCharacteristics(matching: [BluetoothUUID(0x2A38)], in: service)[0]
        return try await sensor.readValue(of: location).first ?? 0
    }
}

@Suite(.timeLimit(.minutes(5))) struct ReadmeExampleTests {
    @Test func readsTheSensorLocationThroughAFlakyConnect() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01])])
            ])
        try bluez.addPeripheral(sensor)
        // The first connection attempt fails, as BlueZ's do now and then: the app must not notice.
        bluez.inject(.error(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), for: .connect)

        let app = SensorLocationReader(busAddress: bluez.busAddress)
        try await waitUntil("powered on") { app.central.state == .poweredOn }
        let reading = Task { try await app.readLocation() }
        // The sensor advertises (as a real one does, over and over) until the app has connected.
        try await waitUntil("the app connected") {
            sensor.advertise()
            return sensor.isConnected
        }
        #expect(try await reading.value == 0x01)
    }
}
