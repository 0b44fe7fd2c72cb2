import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// Runs only inside the emulated BlueZ environment (`Scripts/test-e2e` sets
/// `BLUEZKIT_E2E=1`): the real bluetoothd with hci0 and hci1.
let insideEmulatedBlueZ = ProcessInfo.processInfo.environment["BLUEZKIT_E2E"] == "1"

@Suite(
    .enabled(if: insideEmulatedBlueZ, "needs the real bluetoothd: run Scripts/test-e2e"), .serialized,
    .endToEndScope, .endToEndFailures)
struct EndToEndTests {
    @Test(.loadScaledTimeLimit(minutes: 3)) func ourCentralAgainstBlueZsExampleGattServer() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peripheral = try ExamplePeripheral()
        defer { peripheral.stop() }
        try peripheral.start("example-gatt-server")
        try await waitUntil("example-gatt-server registered", timeout: .seconds(60)) {
            peripheral.log("example-gatt-server").contains("GATT application registered")
        }

        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(adapter: "hci0", usesNotifySockets: true))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        // btvirt reports an advertisement only when advertising or scanning is switched on: scan first.
        central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("discovering") { central.isScanning }
        try peripheral.start("example-advertisement")
        try await waitUntil("discovered the heart-rate advertisement", timeout: .seconds(60)) {
            delegate.discovered != nil
        }
        central.stopScan()
        let sensor = try #require(delegate.discovered)
        #expect(delegate.advertisedServices.contains(BluetoothUUID(0x180D)))
        // Linux: the address bluetoothd reports, the controller's own (btvirt's are public).
        let hci1 = try await BluetoothctlSession.address(of: "hci1")
        #expect(sensor.address == hci1)
        #expect(sensor.addressType == .public)
        // Linux: every controller of the guest (btvirt's, then Bumble's), hci0 in use.
        let adapters = central.adapters
        #expect(adapters.map(\.name) == (0..<emulatedControllers).map { "hci\($0)" } + BumblePeer.adapters)
        #expect(adapters.first { $0.name == "hci1" }?.address == hci1)
        #expect(adapters.filter(\.isInUse).map(\.name) == ["hci0"])

        let recorder = E2EPeripheralDelegate()
        sensor.delegate = recorder
        central.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }

        sensor.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let service = try #require(sensor.services?.first { $0.uuid == BluetoothUUID(0x180D) })
        sensor.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let characteristics = try #require(service.characteristics)
        let measurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })
        let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        let control = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A39) })
        #expect(measurement.properties.contains(.notify))

        sensor.readValue(for: location)
        try await waitUntil("read Body Sensor Location") { recorder.count("value 2A38") == 1 }
        #expect(location.value == Data([0x01]))

        sensor.writeValue(Data([0x01]), for: control, type: .withResponse)
        try await waitUntil("wrote the control point") { recorder.count("wrote 2A39") == 1 }
        #expect(recorder.errors.isEmpty)
        sensor.writeValue(Data([0x02]), for: control, type: .withResponse)
        try await waitUntil("control point refused 0x02") { recorder.count("wrote 2A39") == 2 }
        #expect((recorder.errors.last as? ATTError)?.code == .application(0x80))

        // Without response: the control point has no write-without-response property, so no
        // AcquireWrite; a WriteValue command, which bluetoothd sends as an ATT Write Command.
        sensor.writeValue(Data([0x01]), for: control, type: .withoutResponse)
        try await waitUntil("the command reached example-gatt-server", timeout: .seconds(30)) {
            peripheral.log("example-gatt-server").components(separatedBy: "Energy Expended field reset").count - 1 >= 2
        }

        // Notifications through AcquireNotify's socket (opted in above; StartNotify is the default).
        sensor.setNotifyValue(true, for: measurement)
        try await waitUntil("two heart-rate notifications", timeout: .seconds(30)) {
            recorder.count("value 2A37") >= 2
        }
        #expect(measurement.isNotifying)
        sensor.setNotifyValue(false, for: measurement)
        try await waitUntil("unsubscribed") { recorder.count("notifying 2A37 false") == 1 }

        central.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        // The state changes just before the delegate hears it, on the manager's queue: wait for the call.
        try await waitUntil("didDisconnect") { !delegate.disconnectErrors.isEmpty }
        #expect(delegate.disconnectErrors == ["nil"])

        // Reconnect from a manager that takes notifications as PropertiesChanged (StartNotify).
        let signalsDelegate = E2ECentralDelegate()
        let signalsCentral = CentralManager(
            delegate: signalsDelegate, queue: signalsDelegate.queue,
            options: CentralManagerOptions(adapter: "hci0", usesNotifySockets: false))
        try await waitUntil("hci0 powered on again", timeout: .seconds(30)) { signalsCentral.state == .poweredOn }
        let again = try #require(signalsCentral.retrievePeripherals(withIdentifiers: [sensor.identifier]).first)
        let signalsRecorder = E2EPeripheralDelegate()
        again.delegate = signalsRecorder
        signalsCentral.connect(again)
        try await waitUntil("reconnected", timeout: .seconds(60)) { again.state == .connected }
        again.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services again", timeout: .seconds(30)) { signalsRecorder.count("services") == 1 }
        let serviceAgain = try #require(again.services?.first { $0.uuid == BluetoothUUID(0x180D) })
        again.discoverCharacteristics([BluetoothUUID(0x2A37)], for: serviceAgain)
        try await waitUntil("characteristics again") { signalsRecorder.count("characteristics") == 1 }
        let measurementAgain = try #require(serviceAgain.characteristics?.first)
        again.setNotifyValue(true, for: measurementAgain)
        try await waitUntil("two notifications as signals", timeout: .seconds(30)) {
            signalsRecorder.count("value 2A37") >= 2
        }
        signalsCentral.cancelPeripheralConnection(again)
        try await waitUntil("disconnected again", timeout: .seconds(30)) { again.state == .disconnected }
    }
}

final class E2ECentralDelegate: CentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.central")
    private let state = Mutex<(Peripheral?, AdvertisementData?, [String])>((nil, nil, []))
    var discovered: Peripheral? { state.withLock { $0.0 } }
    /// The last discovery's advertisement.
    var advertisement: AdvertisementData? { state.withLock { $0.1 } }
    var advertisedServices: [BluetoothUUID] { advertisement?.serviceUUIDs ?? [] }
    var disconnectErrors: [String] { state.withLock { $0.2 } }

    /// Forgets the last discovery, so that `discovered` is nil until the next one.
    func forgetDiscovered() {
        state.withLock {
            $0.0 = nil
            $0.1 = nil
        }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        state.withLock {
            $0.0 = peripheral
            $0.1 = advertisementData
        }
    }
    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        state.withLock { $0.2.append(error.map { "\($0)" } ?? "nil") }
    }
}

final class E2EPeripheralDelegate: PeripheralDelegate, @unchecked Sendable {
    private let log = Mutex<([String], [any Error])>(([], []))
    func count(_ prefix: String) -> Int { log.withLock { $0.0.filter { $0.hasPrefix(prefix) }.count } }
    var errors: [any Error] { log.withLock { $0.1 } }
    var events: [String] { log.withLock { $0.0 } }
    private func record(_ event: String, _ error: (any Error)?) {
        log.withLock {
            $0.0.append(event)
            if let error { $0.1.append(error) }
        }
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) { record("services", error) }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record("characteristics", error)
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        let hex = (characteristic.value ?? Data()).map { String(format: "%02x", $0) }.joined()
        record("value \(characteristic.uuid) \(hex)", error)
    }
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        record("wrote \(characteristic.uuid)", error)
    }
    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
        record("modified \(invalidatedServices.map(\.uuid.uuidString).joined(separator: ","))", nil)
    }
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        record("notifying \(characteristic.uuid) \(characteristic.isNotifying)", error)
    }
}
