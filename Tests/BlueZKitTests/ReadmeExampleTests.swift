import BlueZKit
import BlueZKitTesting
import Dispatch
import Testing

// The README's "Testing your app without Bluetooth" example, run: a small app (it reads where a
// heart-rate sensor is worn) and its test against the simulated BlueZ, including a fault.
// Scripts/readme-check compiles the README's block as it stands, so the block cannot stop
// compiling; this copy runs it, so keep the two the same (the suite's time limit is the only
// addition).

/// The app: finds a heart-rate sensor, connects and reads Body Sensor Location.
final class SensorLocationReader: Sendable {
    let central: CentralManager

    init(busAddress: String?) {
        central = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "app"), options: .init(busAddress: busAddress))
    }
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
            ],
            advertisingInterval: .milliseconds(100))  // advertises over and over, as a real sensor does
        try bluez.addPeripheral(sensor)
        // The first connection attempt fails, as BlueZ's do now and then: the app must not notice.
        bluez.inject(.error(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), for: .connect)

        let app = SensorLocationReader(busAddress: bluez.busAddress)
        for await state in app.central.states() where state == .poweredOn { break }
        #expect(try await app.readLocation() == 0x01)
    }
}
