import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the serialized end-to-end suite: hci0 and hci1 through the real bluetoothd.
extension EndToEndTests {
    static let earlyService = BluetoothUUID(string: "5A1E0201-B1E2-4C00-9E00-000000000001")
    static let earlyValue = BluetoothUUID(string: "5A1E0202-B1E2-4C00-9E00-000000000001")

    /// A peripheral that notifies the instant a central subscribes (our peripheral manager,
    /// calling `updateValue` inside `didSubscribeTo`): that first value reaches the central's app
    /// through `StartNotify` (the default), always. Through `AcquireNotify`'s socket it usually
    /// does, but not always (a known, intermittent issue below): bleak went back to `StartNotify`
    /// by default after reports that such values were lost on the socket path, and so did we.
    /// A bluetoothd peripheral answers the CCC write before it asks the app (`ccc_write_cb`), so
    /// this value leaves after the write response; a value sent *before* it (possible for other
    /// peripherals) would still be dropped on the socket path of bluetoothd 5.66 and 5.82
    /// (`notify_io_cb`: "Drop notification if the sock is not ready").
    @Test(.loadScaledTimeLimit(minutes: 3), arguments: [false, true])
    func theFirstValueAfterSubscribingReachesTheApp(usesNotifySockets: Bool) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = EarlyNotifier()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        defer {
            manager.stopAdvertising()
            manager.removeAllServices()
        }
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let value = MutableCharacteristic(
            type: Self.earlyValue, properties: [.notify], value: nil, permissions: [])
        let service = MutableService(type: Self.earlyService, primary: true)
        service.characteristics = [value]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.log.contains("added") }

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue,
            options: CentralManagerOptions(adapter: "hci0", usesNotifySockets: usesNotifySockets))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [Self.earlyService])
        try await waitUntil("scanning") { centralManager.isScanning }
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "BZK-E", CBAdvertisementDataServiceUUIDsKey: [Self.earlyService],
        ])
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)
        defer { centralManager.cancelPeripheralConnection(sensor) }  // when the test fails early

        let recorder = E2EPeripheralDelegate()
        sensor.delegate = recorder
        centralManager.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        sensor.discoverServices([Self.earlyService])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let remote = try #require(sensor.services?.first)
        sensor.discoverCharacteristics(nil, for: remote)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let remoteValue = try #require(remote.characteristics?.first { $0.uuid == Self.earlyValue })

        sensor.setNotifyValue(true, for: remoteValue)
        try await waitUntil("subscribed") { recorder.count("notifying") == 1 }
        #expect(recorder.errors.isEmpty, "\(recorder.errors)")
        try await waitUntil("the peripheral sent its first value", timeout: .seconds(30)) {
            server.log.contains("sent 2a")
        }
        let arrives = { () async throws in
            try await waitUntil("the first value reached the app", timeout: .seconds(10)) {
                recorder.count("value \(Self.earlyValue) 2a") >= 1
            }
        }
        if usesNotifySockets {
            // Seen lost on 5.66 in a loaded run: with Enhanced ATT the notification can come in on
            // another bearer than the CCC write's response and be handled first, and
            // `notify_io_cb` drops it while the socket is not ready. Why StartNotify is the default.
            await withKnownIssue("bluetoothd may drop the first value on the socket path", isIntermittent: true) {
                try await arrives()
            }
        } else {
            try await arrives()
        }
        #expect(server.log.filter { $0.hasPrefix("sent") } == ["sent 2a"], "one value only: \(server.log)")
        // The link goes down before the next test (a link left up by an earlier test once made
        // this test's StartNotify fail with NotConnected).
        centralManager.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
    }
}

/// Sends `2A` from inside `didSubscribeTo`, once, and records what happened.
final class EarlyNotifier: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.early")
    private let events = Mutex<[String]>([])
    var log: [String] { events.withLock { $0 } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "added" : "add failed: \(error!)") }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        guard !log.contains(where: { $0.hasPrefix("sent") }) else { return }
        let sent = peripheral.updateValue(Data([0x2A]), for: characteristic, onSubscribedCentrals: nil)
        events.withLock { $0.append(sent ? "sent 2a" : "not sent") }
    }
}
