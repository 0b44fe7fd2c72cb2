import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// `ScanOptions.pattern` while another discovery client scans without one: bluetoothd (and the
/// simulator) report a device to every client once one client's filter admits it, so the
/// pattern must hold in the central too. The e2e twin is
/// `ourCentralsPatternAndRSSIThresholdFilterBumbleAdvertisers`.
@Suite(.timeLimit(.minutes(2))) struct CentralScanPatternTests {
    @Test func aPatternHoldsWhileAnotherClientScansForEverything() async throws {
        let fixture = try await CentralFixture.make()
        let sensor = CentralManagerScanTests.heartRateSensor()
        let lock = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "Lock", rssi: -60, serviceUUIDs: ["FFF0"])
        try fixture.bluez.addPeripheral(sensor)
        try fixture.bluez.addPeripheral(lock)
        // The fixture's central: a name pattern. A second one: an address pattern.
        fixture.central.scanForPeripherals(withServices: nil, options: ScanOptions(pattern: "HR"))
        let byAddress = RecordingCentralDelegate()
        let addressCentral = CentralManager(
            delegate: byAddress, queue: byAddress.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("address central on") { addressCentral.state == .poweredOn }
        addressCentral.scanForPeripherals(withServices: nil, options: ScanOptions(pattern: "C0:FF:EE:00:00:02"))
        // Another client (here a third central) scans for everything.
        let everything = RecordingCentralDelegate()
        let other = CentralManager(
            delegate: everything, queue: everything.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("other central on") { other.state == .poweredOn }
        other.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))
        try await waitUntil("every client's filter is set") { fixture.bluez.adapters.first?.isDiscovering == true }
        for rssi: Int16 in [-61, -62] {
            sensor.rssi = rssi - 10
            lock.rssi = rssi
            sensor.advertise()
            lock.advertise()
        }
        try await waitUntil("both seen by the client without a pattern, after every filter was set") {
            everything.discoveries(named: "Lock").contains { $0.rssi == -62 }
                && everything.discoveries(named: "HRM").contains { $0.rssi == -72 }
        }
        // Last, new data from both: a pattern's central that reported it has had every signal before.
        sensor.manufacturerData = [0x004C: [0x09]]
        lock.manufacturerData = [0xFFFF: [0x09]]
        sensor.advertise()
        lock.advertise()
        let marker: (RecordingCentralDelegate, String) -> Bool = { delegate, name in
            delegate.discoveries(named: name).contains { $0.data.manufacturerData?.last == 0x09 }
        }
        try await waitUntil("each pattern's peripheral reported with the last data") {
            marker(fixture.delegate, "HRM") && marker(byAddress, "Lock") && marker(everything, "Lock")
        }
        #expect(fixture.delegate.discoveries(named: "Lock").isEmpty)
        #expect(byAddress.discoveries(named: "HRM").isEmpty)
    }
}
