import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

/// The async/await API beside the delegates, on the simulated BlueZ.
@Suite(.timeLimit(.minutes(1))) struct CentralAsyncTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.async")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    static func sensor() -> (SimulatedPeripheral, SimulatedCharacteristic) {
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        measurement, SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x02]),
                    ])
            ])
        return (sensor, measurement)
    }

    static func found(
        _ bluez: SimulatedBlueZ, _ sensor: SimulatedPeripheral,
        scanningFor service: BluetoothUUID = BluetoothUUID(0x180D)
    ) async throws -> (CentralManager, Quiet, Peripheral) {
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let peripheral = try await firstDiscovery(central, scanningFor: [service], advertising: sensor)
        return (central, delegate, peripheral)
    }

    /// Adds `sensor`, finds it by `service` (``found(_:_:scanningFor:)``), connects with
    /// `connect(to:)` and discovers `service`.
    static func connected(_ bluez: SimulatedBlueZ, _ sensor: SimulatedPeripheral, service uuid: BluetoothUUID)
        async throws -> (CentralManager, Quiet, Peripheral, Service)
    {
        try bluez.addPeripheral(sensor)
        let (central, delegate, peripheral) = try await found(bluez, sensor, scanningFor: uuid)
        try await central.connect(to: peripheral)
        let service = try #require(try await peripheral.discoverServices(matching: [uuid]).first)
        return (central, delegate, peripheral, service)
    }

    @Test func connectsDiscoversReadsAndStreamsNotifications() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurementSource) = Self.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await Self.found(bluez, sensor)
        try await central.connect(to: peripheral)
        #expect(peripheral.state == .connected)
        let services = try await peripheral.discoverServices(matching: [BluetoothUUID(0x180D)])
        let service = try #require(services.first)
        let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
        #expect(Set(characteristics.map(\.uuid)) == [BluetoothUUID(0x2A37), BluetoothUUID(0x2A38)])
        let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        #expect(try await peripheral.readValue(of: location) == Data([0x02]))

        let measurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })
        var values = peripheral.notifications(of: measurement).makeAsyncIterator()
        try await waitUntil("subscribed") { measurementSource.isNotifying }
        measurementSource.notify([0x00, 70])
        measurementSource.notify([0x00, 71])
        #expect(try await values.next() == Data([0x00, 70]))
        #expect(try await values.next() == Data([0x00, 71]))
        // The link drops: the stream ends with the error.
        sensor.dropConnection()
        await #expect(throws: BluetoothError.self) { _ = try await values.next() }
        withExtendedLifetime(central) {}
    }

    @Test func endingTheLastStreamUnsubscribes() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurementSource) = Self.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await Self.found(bluez, sensor)
        try await central.connect(to: peripheral)
        let service = try #require(
            try await peripheral.discoverServices(matching: nil).first { $0.uuid == BluetoothUUID(0x180D) })
        let measurement = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x2A37)], in: service).first)
        let consumer = Task {
            var count = 0
            for try await _ in peripheral.notifications(of: measurement) { count += 1 }
            return count
        }
        try await waitUntil("subscribed") { measurementSource.isNotifying }
        consumer.cancel()
        try await waitUntil("unsubscribed when the stream ended") { !measurementSource.isNotifying }
        withExtendedLifetime(central) {}
    }

    @Test func cancellingTheTaskCancelsAPendingConnection() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = Self.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await Self.found(bluez, sensor)
        sensor.setInRange(false)
        let connecting = Task { try await central.connect(to: peripheral) }
        try await waitUntil("pending") { peripheral.state == .connecting }
        connecting.cancel()
        await #expect(throws: CancellationError.self) { try await connecting.value }
        try await waitUntil("the request is gone") { peripheral.state == .disconnected }
    }

    @Test func failsFastWhenNotConnected() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = Self.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await Self.found(bluez, sensor)
        await #expect(throws: BluetoothError.self) { _ = try await peripheral.discoverServices(matching: nil) }
        withExtendedLifetime(central) {}
    }
}
