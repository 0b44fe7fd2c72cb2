import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// `CBAdvertisementDataServiceUUIDsKey` and the scan's service filter follow what a peripheral
/// advertises, not the services bluetoothd resolved over GATT (which its `Device1.UUIDs` shows
/// from the first connection on, also while disconnected, with the default GATT cache).
@Suite(.timeLimit(.minutes(5))) struct CentralAdvertisedServicesTests {
    /// Advertises 180D; its GATT database also has FFF1, which it never advertises.
    static func sensor() -> SimulatedPeripheral {
        SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1])]
                ),
                SimulatedService(
                    uuid: "FFF1", characteristics: [SimulatedCharacteristic(uuid: "FFF2", flags: ["read"], value: [2])]
                ),
            ])
    }

    /// Connects `peripheral`, resolves its services and disconnects, so that bluetoothd keeps
    /// its GATT database (and its `UUIDs` show that database from now on).
    static func browseOnce(_ fixture: CentralFixture, _ peripheral: Peripheral) async throws {
        let delegate = RecordingPeripheralDelegate()
        peripheral.delegate = delegate
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        peripheral.discoverServices(nil)
        try await waitUntil("services") { delegate.events.count == 1 }
        #expect(peripheral.services?.contains { $0.uuid == BluetoothUUID(0xFFF1) } == true)
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { peripheral.state == .disconnected }
    }

    @Test(arguments: [SimulatedBlueZ.Version.bluez5_66, .bluez5_82])
    func advertisementDataAndFilterUseTheAdvertisedServicesAfterAGATTBrowse(version: SimulatedBlueZ.Version)
        async throws
    {
        let fixture = try await CentralFixture.make(options: SimulatedBlueZ.Options(version: version))
        let hrm = Self.sensor()
        let lock = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "Lock", serviceUUIDs: ["FFF0"])
        try fixture.bluez.addPeripheral(hrm)
        try fixture.bluez.addPeripheral(lock)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: hrm)
        #expect(fixture.delegate.discoveries(named: "HRM").first?.data.serviceUUIDs == [BluetoothUUID(0x180D)])
        try await Self.browseOnce(fixture, peripheral)

        // Another client discovers everything, so bluetoothd's own filter lets every
        // advertisement through: only the central's filter is left to judge.
        let other = RecordingCentralDelegate()
        let everything = CentralManager(
            delegate: other, queue: other.queue, options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("the other central is powered on") { everything.state == .poweredOn }
        everything.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))
        try await waitUntil("the other central scans") { everything.isScanning }

        // FFF1 is in the sensor's GATT database only: a scan for it does not report the sensor.
        let before = fixture.delegate.discoveries(named: "HRM").count
        fixture.central.scanForPeripherals(
            withServices: [BluetoothUUID(0xFFF1), BluetoothUUID(0xFFF0)], options: ScanOptions(allowDuplicates: true))
        try await waitUntil("scanning") { fixture.central.isScanning }
        hrm.rssi = -45
        hrm.advertise()
        lock.rssi = -46
        lock.advertise()
        // Advertisements reach the central in bus order: once the lock's is in, so is the sensor's.
        try await waitUntil("the lock's advertisement") { !fixture.delegate.discoveries(named: "Lock").isEmpty }
        try await waitUntil("the other central saw the sensor's") {
            other.discoveries(named: "HRM").contains { $0.rssi == -45 }
        }
        #expect(fixture.delegate.discoveries(named: "HRM").count == before)

        // A scan for what it advertises reports it, with only that in its advertisement data.
        fixture.central.scanForPeripherals(
            withServices: [BluetoothUUID(0x180D)], options: ScanOptions(allowDuplicates: true))
        hrm.rssi = -47
        hrm.advertise()
        try await waitUntil("the sensor again") { fixture.delegate.discoveries(named: "HRM").count > before }
        let again = try #require(fixture.delegate.discoveries(named: "HRM").last)
        #expect(again.rssi == -47)
        #expect(again.data.serviceUUIDs == [BluetoothUUID(0x180D)])
        everything.stopScan()
    }

    /// A central that never saw the sensor's advertisements before bluetoothd resolved its
    /// services cannot learn what it advertises (nothing on the bus says it): its advertisement
    /// data has no service UUIDs, and the resolved services stand in for the filter.
    @Test(arguments: [SimulatedBlueZ.Version.bluez5_66, .bluez5_82])
    func aLaterCentralFindsABrowsedSensorByItsResolvedServices(version: SimulatedBlueZ.Version) async throws {
        let fixture = try await CentralFixture.make(options: SimulatedBlueZ.Options(version: version))
        let hrm = Self.sensor()
        try fixture.bluez.addPeripheral(hrm)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: hrm)
        try await Self.browseOnce(fixture, peripheral)

        let later = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: later, queue: later.queue, options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("the later central is powered on") { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("scanning") { central.isScanning }
        hrm.advertise()
        try await waitUntil("the sensor") { !later.discoveries(named: "HRM").isEmpty }
        #expect(later.discoveries(named: "HRM").first?.data.serviceUUIDs == [])
        central.stopScan()
    }

    /// From 5.69 bluetoothd counts each service data key among the advertised UUIDs
    /// (`add_service_data`), so they are in the advertisement data's service UUIDs too; 5.66 does
    /// not (bluetoothd's own UUID filter never matches them: `is_filter_match` looks at the UUID
    /// lists only).
    @Test(arguments: [SimulatedBlueZ.Version.bluez5_66, .bluez5_82])
    func serviceDataKeysCountAsAdvertisedServicesFrom569(version: SimulatedBlueZ.Version) async throws {
        let fixture = try await CentralFixture.make(options: SimulatedBlueZ.Options(version: version))
        let beacon = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:03", name: "Beacon", serviceUUIDs: ["FEAA"], serviceData: ["FE95": [0x01]])
        try fixture.bluez.addPeripheral(beacon)
        _ = try await firstDiscovery(fixture.central, scanningFor: nil, advertising: beacon)
        let data = try #require(fixture.delegate.discoveries(named: "Beacon").first?.data)
        let expected = version == .bluez5_66 ? [BluetoothUUID(0xFEAA)] : [BluetoothUUID(0xFEAA), BluetoothUUID(0xFE95)]
        #expect(data.serviceUUIDs == expected)
        #expect(data.serviceData == [BluetoothUUID(0xFE95): Data([0x01])])
    }
}
