import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

/// bluetoothd exports a primary service whose handles moved over a cached one as secondary
/// (`discovery_parse_services` re-inserts it with `primary` false; seen after a peripheral app
/// registered its services at other handles). A secondary service is reachable only through an
/// include, so one that no service includes is discovered as the primary service it is.
@Suite(.timeLimit(.minutes(5))) struct CentralSecondaryServiceTests {
    @Test func aSecondaryServiceThatNoServiceIncludesIsDiscoveredAsPrimary() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let included = SimulatedService(uuid: "5C10", isPrimary: false)
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:5C", name: "Moved", serviceUUIDs: ["5C00"],
            services: [
                SimulatedService(uuid: "5C00", includes: [included]), included,
                SimulatedService(
                    uuid: "180D", isPrimary: false,
                    characteristics: [SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])]),
            ])
        try bluez.addPeripheral(sensor)
        let delegate = CentralAsyncTests.Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        defer { withExtendedLifetime(central) {} }
        try await waitUntil("powered on") { central.state == .poweredOn }
        let peripheral = try await firstDiscovery(central, scanningFor: [BluetoothUUID(0x5C00)], advertising: sensor)
        try await central.connect(to: peripheral)

        let heartRate = try await peripheral.discoverServices(matching: [BluetoothUUID(0x180D)])
        #expect(heartRate.map(\.uuid) == [BluetoothUUID(0x180D)])
        #expect(heartRate.first?.isPrimary == true)
        // The secondary service that is included stays one: not among the primary services,
        // found through its includer.
        let all = try await peripheral.discoverServices(matching: nil)
        #expect(all.map(\.uuid).contains(BluetoothUUID(0x180D)))
        #expect(!all.map(\.uuid).contains(BluetoothUUID(0x5C10)))
        let includer = try #require(all.first { $0.uuid == BluetoothUUID(0x5C00) })
        let secondary = try await peripheral.discoverIncludedServices(matching: nil, in: includer)
        #expect(secondary.map(\.uuid) == [BluetoothUUID(0x5C10)])
        #expect(secondary.first?.isPrimary == false)
    }
}
