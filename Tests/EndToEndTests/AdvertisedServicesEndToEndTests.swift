import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the other end-to-end tests: they all use hci0 and hci1.
extension EndToEndTests {
    /// BlueZ's example-advertisement on hci1 advertises 180D and 180F (and service data for
    /// 9999); its example-gatt-server also serves a test service it never advertises. Once the
    /// central has browsed it, bluetoothd's `Device1.UUIDs` lists the GATT services (also while
    /// disconnected: the guest's bluetoothd keeps its GATT cache), yet the advertisement data
    /// still lists the advertised services only, and a scan for the test service does not report
    /// the peripheral.
    @Test(.loadScaledTimeLimit(minutes: 6)) func advertisementDataKeepsTheAdvertisedServicesAfterAGATTBrowse()
        async throws
    {
        let testService = try #require(BluetoothUUID(parsing: "12345678-1234-5678-1234-56789abcdef0"))
        let session = try await ExampleGattServerSession.start()
        defer { session.example.stop() }
        let (delegate, central, sensor) = (session.delegate, session.central, session.sensor)
        let first = delegate.advertisedServices
        #expect(first.contains(BluetoothUUID(0x180D)) && first.contains(BluetoothUUID(0x180F)), "\(first)")
        // From 5.69 bluetoothd counts a service data key as an advertised UUID (add_service_data).
        #expect(first.contains(BluetoothUUID(0x9999)) == emulatedBlueZ(atLeast: "5.69"), "\(first)")
        #expect(!first.contains(testService))

        let recorder = E2EPeripheralDelegate()
        sensor.delegate = recorder
        central.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        sensor.discoverServices(nil)
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        #expect(sensor.services?.contains { $0.uuid == testService } == true)
        central.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }

        // The premise: bluetoothd now answers UUIDs with the resolved services.
        let hci1 = try await BluetoothctlSession.address(of: "hci1")
        let path = "/org/bluez/hci0/dev_" + hci1.replacingOccurrences(of: ":", with: "_")
        let uuids = try await Tool.output(
            "/usr/bin/busctl", ["get-property", "org.bluez", path, "org.bluez.Device1", "UUIDs"])
        #expect(uuids.contains("12345678-1234-5678-1234-56789abcdef0"), "UUIDs: \(uuids)")

        // Another client discovers everything, so bluetoothd lets every advertisement through
        // (and on 5.87 the central's filter goes without UUIDs anyway): the central judges alone.
        let counter = AdvertisementCounter()
        let everything = CentralManager(
            delegate: counter, queue: counter.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("the other central is powered on", timeout: .seconds(30)) {
            everything.state == .poweredOn
        }
        everything.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))
        delegate.forgetDiscovered()
        central.scanForPeripherals(withServices: [testService], options: ScanOptions(allowDuplicates: true))
        try await waitUntil("scanning for the test service") { central.isScanning }
        // btvirt reports an advertiser again each time scanning is switched on, which the kernel
        // does at the end of each 10.24 s discovery window.
        let seen = counter.count(hci1)
        try await waitUntil("two more advertisements of hci1", timeout: .seconds(90)) {
            counter.count(hci1) >= seen + 2
        }
        #expect(delegate.discovered == nil, "reported for a service it does not advertise")

        // A scan for an advertised service reports it, with the advertised services only.
        central.scanForPeripherals(withServices: [BluetoothUUID(0x180F)], options: ScanOptions(allowDuplicates: true))
        try await waitUntil("discovered again", timeout: .seconds(90)) { delegate.discovered != nil }
        let again = delegate.advertisedServices
        #expect(Set(again) == Set(first), "first \(first), now \(again)")
        #expect(!again.contains(testService))
        central.stopScan()
        everything.stopScan()
    }
}

/// Counts the discoveries of each address (any queue).
final class AdvertisementCounter: CentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.counter")
    private let counts = Mutex<[String: Int]>([:])

    func count(_ address: String) -> Int { counts.withLock { $0[address] ?? 0 } }

    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        guard let address = peripheral.address else { return }
        counts.withLock { $0[address, default: 0] += 1 }
    }
}
