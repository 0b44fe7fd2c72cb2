import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct CentralManagerScanTests {
    static func heartRateSensor(_ address: String = "C0:FF:EE:00:00:01", name: String = "HRM") -> SimulatedPeripheral {
        SimulatedPeripheral(
            address: address, name: name, rssi: -52, txPower: 4, serviceUUIDs: ["180D"],
            manufacturerData: [0x004C: [0x02, 0x15]], serviceData: ["180F": [0x64]])
    }

    @Test func discoversAPeripheralWithItsAdvertisementData() async throws {
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(Self.heartRateSensor())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        let discovery = try #require(fixture.delegate.discoveries(named: "HRM").first)
        #expect(discovery.rssi == -52)
        #expect(discovery.peripheral.name == "HRM")
        #expect(discovery.data.serviceUUIDs.contains(BluetoothUUID(0x180D)))
        #expect(discovery.data.manufacturerData == Data([0x4C, 0x00, 0x02, 0x15]))
        #expect(discovery.data.serviceData[BluetoothUUID(0x180F)] == Data([0x64]))
        #expect(discovery.data.txPowerLevel == 4)
        #expect(discovery.data[CBAdvertisementDataLocalNameKey] as? String == "HRM")
        #expect(fixture.central.isScanning)
        #expect(fixture.bluez.adapters.first?.isDiscovering == true)
        #expect(fixture.delegate.offQueueCalls == 0)
    }

    @Test func filtersByServiceLocallyAsWellAsInBlueZ() async throws {
        let fixture = try await CentralFixture.make()
        let hrm = Self.heartRateSensor()
        let lock = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "Lock", serviceUUIDs: ["FFF0"])
        try fixture.bluez.addPeripheral(hrm)
        try fixture.bluez.addPeripheral(lock)
        // Another client's broader filter makes BlueZ report everything; we must still filter.
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("HRM discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        lock.advertise()
        hrm.rssi = -40
        hrm.advertise()
        fixture.central.scanForPeripherals(
            withServices: [BluetoothUUID(0x180D)], options: ScanOptions(allowDuplicates: true))
        hrm.rssi = -41
        hrm.advertise()
        try await waitUntil("the later HRM advertisement") { fixture.delegate.discoveries(named: "HRM").count >= 2 }
        #expect(fixture.delegate.discoveries(named: "Lock").isEmpty)
    }

    /// bluetoothd 5.87 crashes on a discovery filter with service UUIDs (BlueZ issue 2282): with
    /// its Device ID the filter goes without them, so bluetoothd reports
    /// every device, and the central still reports only the peripherals that advertise the
    /// services; with 5.66's the UUIDs go to bluetoothd as before.
    @Test(arguments: [("usb:v1D6Bp0246d0557", false), ("usb:v1D6Bp0246d0542", true)])
    func aServiceScanOnBluetoothd587LeavesTheUUIDsOutAndStillFilters(modalias: String, sendsUUIDs: Bool)
        async throws
    {
        var configuration = SimulatedAdapter.Configuration.default
        configuration.modalias = modalias
        let fixture = try await CentralFixture.make(adapters: [configuration])
        let adapter = try #require(fixture.bluez.adapters.first)
        let hrm = Self.heartRateSensor()
        let lock = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "Lock", serviceUUIDs: ["FFF0"])
        try fixture.bluez.addPeripheral(lock)
        try fixture.bluez.addPeripheral(hrm)
        fixture.central.scanForPeripherals(
            withServices: [BluetoothUUID(0x180D)], options: ScanOptions(allowDuplicates: true))
        try await waitUntil("HRM discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        let filters = fixture.bluez.discoveryFilters(on: adapter)
        #expect(filters.count == 1)
        #expect(filters.first?.uuids.isEmpty == !sendsUUIDs)
        // Every scan without a pattern of the app's has the empty one (see CentralManagerFlaglessAdvertiserTests).
        #expect(filters.first?.pattern == "")
        // Advertisements reach the central in bus order: once the later HRM one is in, so is the lock's.
        lock.advertise()
        let reported = fixture.delegate.discoveries(named: "HRM").count
        hrm.rssi = -40
        hrm.advertise()
        try await waitUntil("the later HRM advertisement") {
            fixture.delegate.discoveries(named: "HRM").count > reported
        }
        #expect(fixture.delegate.discoveries(named: "Lock").isEmpty)
    }

    @Test func reportsOncePerScanWithoutDuplicatesAndAgainWhenDataChanges() async throws {
        let fixture = try await CentralFixture.make()
        let sensor = Self.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("first report") { fixture.delegate.discoveries(named: "HRM").count == 1 }
        sensor.rssi = -70
        sensor.advertise()
        sensor.rssi = -71
        sensor.advertise()
        sensor.manufacturerData = [0x004C: [0x03]]
        sensor.advertise()
        try await waitUntil("the changed data") {
            fixture.delegate.discoveries(named: "HRM").last?.data.manufacturerData == Data([0x4C, 0x00, 0x03])
        }
        #expect(fixture.delegate.discoveries(named: "HRM").count == 2)
    }

    @Test func reportsEveryAdvertisementWithDuplicates() async throws {
        let fixture = try await CentralFixture.make()
        let sensor = Self.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(
            withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        try await waitUntil("first report") { fixture.delegate.discoveries(named: "HRM").count == 1 }
        for rssi in [-61, -62, -63] as [Int16] {
            sensor.rssi = rssi
            sensor.advertise()
        }
        try await waitUntil("every advertisement") { fixture.delegate.discoveries(named: "HRM").count == 4 }
        #expect(fixture.delegate.discoveries(named: "HRM").map(\.rssi) == [-52, -61, -62, -63])
        let peripherals = Set(fixture.delegate.discoveries(named: "HRM").map(\.peripheral))
        #expect(peripherals.count == 1)
    }

    @Test func doesNotReportCachedDevicesUntilTheyAdvertise() async throws {
        let fixture = try await CentralFixture.make()
        let sensor = Self.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("first scan's report") { fixture.delegate.discoveries(named: "HRM").count == 1 }
        fixture.central.stopScan()
        #expect(!fixture.central.isScanning)
        try await waitUntil("discovery stopped") { fixture.bluez.adapters.first?.isDiscovering == false }
        sensor.setInRange(false)
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovery restarted") { fixture.bluez.adapters.first?.isDiscovering == true }
        // The device is still in BlueZ's cache, but nothing was received from it.
        #expect(fixture.delegate.discoveries(named: "HRM").count == 1)
        sensor.setInRange(true)
        sensor.advertise()
        try await waitUntil("reported again once it advertises") {
            fixture.delegate.discoveries(named: "HRM").count == 2
        }
        #expect(
            fixture.delegate.discoveries(named: "HRM")[0].peripheral
                === fixture.delegate.discoveries(named: "HRM")[1].peripheral)
    }

    @Test func yieldsDiscoveriesToTheAsyncStreamToo() async throws {
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(Self.heartRateSensor())
        let stream = fixture.central.discoveries()
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.peripheral.name == "HRM")
        #expect(first?.advertisementData.serviceUUIDs.contains(BluetoothUUID(0x180D)) == true)
    }

    /// Code that connects only to peripherals advertising as connectable (a common iOS idiom)
    /// must connect: bluetoothd does not say, so a discovery says connectable.
    @Test func aDiscoveryIsConnectable() async throws {
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(Self.heartRateSensor())
        let stream = fixture.central.discoveries()
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        var iterator = stream.makeAsyncIterator()
        let data = try #require(await iterator.next()?.advertisementData)
        #expect(data.isConnectable == true)
        #expect((data[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue == true)
    }

    @Test func identifiersAreStableAndPerAdapter() async throws {
        let fixture = try await CentralFixture.make()
        let sensor = Self.heartRateSensor()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        let first = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral.identifier
        // A second manager on the same adapter derives the same identifier.
        let delegate = RecordingCentralDelegate()
        let other = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("second manager on") { other.state == .poweredOn }
        other.scanForPeripherals(withServices: nil)
        sensor.advertise()
        try await waitUntil("second manager discovered") { !delegate.discoveries(named: "HRM").isEmpty }
        #expect(delegate.discoveries(named: "HRM").first?.peripheral.identifier == first)
    }
}
