import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Mistakes and vanishing devices give clear errors, never a crash or a request to the wrong device.
@Suite(.timeLimit(.minutes(5))) struct CentralBadInputTests {
    @Test func aCharacteristicOfAnotherPeripheralIsRefused() async throws {
        let (fixture, _, first, firstEvents, _) = try await CentralGATTTests.connectedSensor()
        defer { withExtendedLifetime(fixture) {} }
        first.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { firstEvents.events.count == 1 }
        let service = try #require(first.services?.first)
        first.discoverCharacteristics([BluetoothUUID(0x2A38)], for: service)
        try await waitUntil("characteristics") { firstEvents.events.count == 2 }
        let location = try #require(service.characteristics?.first)

        let other = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:02", name: "Other", serviceUUIDs: ["180F"],
            services: [
                SimulatedService(
                    uuid: "180F", characteristics: [SimulatedCharacteristic(uuid: "2A19", flags: ["read"], value: [7])])
            ])
        try fixture.bluez.addPeripheral(other)
        let second = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180F)], advertising: other)
        let secondEvents = RecordingPeripheralDelegate()
        second.delegate = secondEvents
        fixture.central.connect(second)
        try await waitUntil("second connected") { second.state == .connected }

        second.readValue(for: location)
        second.writeValue(Data([1]), for: location, type: .withResponse)
        second.setNotifyValue(true, for: location)
        try await waitUntil("three refusals") { secondEvents.events.count == 3 }
        #expect(secondEvents.events == ["value 2A38  error", "wrote 2A38 error", "notifying 2A38 false error"])
        #expect((secondEvents.lastError as? BluetoothError)?.code == .invalidParameters)
        // The first peripheral's own delegate heard nothing of it.
        #expect(firstEvents.events.count == 2)
    }

    @Test func aDeviceThatVanishesDuringServiceDiscoveryFailsIt() async throws {
        // Service discovery that takes far longer than the test: the device goes before it ends.
        let bluez = try await SimulatedBlueZ.start(
            options: .init(
                timing: .init(
                    connection: .zero, serviceDiscovery: .seconds(60), connectTimeout: .milliseconds(50),
                    disconnect: .zero, pairing: .zero)))
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let fixture = CentralFixture(bluez: bluez, delegate: delegate, central: central)
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:03", name: "Gone", serviceUUIDs: ["180D"],
            services: [SimulatedService(uuid: "180D", characteristics: [])])
        try fixture.bluez.addPeripheral(sensor)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: sensor)
        let events = RecordingPeripheralDelegate()
        peripheral.delegate = events
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        peripheral.discoverServices(nil)
        #expect(fixture.bluez.removeDevice(sensor))
        try await waitUntil("discovery failed") { events.events.count == 1 }
        #expect(events.events == ["services  error"])
        #expect((events.lastError as? BluetoothError)?.code == .peripheralDisconnected)
        #expect(peripheral.state == .disconnected)
    }

    /// `CBUUID(string:)` traps on invalid text, as Apple's raises; BlueZKit parses what comes from the
    /// bus with `init(parsing:)`, so invalid UUID strings in bluetoothd's properties are skipped.
    @Test func invalidUUIDStringsFromTheBusAreSkipped() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let battery = SimulatedCharacteristic(uuid: "2A19", flags: ["read"], value: [90])
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:04", name: "Odd", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1])]),
                SimulatedService(uuid: "180F", characteristics: [battery]),
            ])
        try fixture.bluez.addPeripheral(sensor)
        fixture.bluez.overrideProperty(
            "UUIDs", on: sensor, with: .strings(["0000180d-0000-1000-8000-00805f9b34fb", "not-a-uuid", "0x", "{180F}"]))
        let peripheral = try await firstDiscovery(fixture.central, scanningFor: nil, advertising: sensor)
        let data = try #require(fixture.delegate.discoveries(named: "Odd").first?.data)
        #expect(data.serviceUUIDs == [BluetoothUUID(0x180D)])

        let events = RecordingPeripheralDelegate()
        peripheral.delegate = events
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        let batteryPath = try #require(battery.objectPath)
        fixture.bluez.overrideProperty(
            "UUID", of: "org.bluez.GattCharacteristic1", at: batteryPath, with: .string("2A1G"))
        peripheral.discoverServices(nil)
        try await waitUntil("services") { events.events.count == 1 }
        let service = try #require(peripheral.services?.first { $0.uuid == BluetoothUUID(0x180F) })
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { events.events.count == 2 }
        #expect(service.characteristics?.isEmpty == true, "the characteristic whose UUID is not one is skipped")
    }
}
