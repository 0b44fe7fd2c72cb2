import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the other end-to-end tests: they share hci0 and hci1.
extension EndToEndTests {
    /// A service UUID of this test's own (hci0 may have cached the other tests' databases).
    static let pairingService = BluetoothUUID(string: "5A1E0002-B1E2-4C00-9E00-000000000002")

    /// Reading characteristics that need encryption (`encrypt-read`) makes BlueZ pair the two
    /// adapters, with no bluetoothctl or other agent of anyone's running: our peripheral on hci1,
    /// our central on hci0, through the real bluetoothd. The pairing is security-triggered on
    /// the central and incoming on the peripheral, so bluetoothd asks its *default* agent on
    /// both sides: both managers ask to be it (`requestsDefaultPairingAgent`), which is no
    /// longer the default.
    @Test(.loadScaledTimeLimit(minutes: 3), .asksForDefaultAgent) func readingAnEncryptedCharacteristicPairs()
        async throws
    {
        // No keys from earlier tests on either side: the pairing must happen here.
        try await ExamplePeripheral.forgetKnownDevices()
        let hci0 = try await BluetoothctlSession.address(of: "hci0")
        let hci1 = try await BluetoothctlSession.address(of: "hci1")
        try await PairingTools.withoutBonds { try await pairs(hci0: hci0, hci1: hci1) }
    }

    /// The pairing test's body, between the removal of every key before and after it.
    private func pairs(hci0: String, hci1: String) async throws {

        let server = E2EPairingPeripheralDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue,
            options: PeripheralManagerOptions(adapter: "hci1", requestsDefaultPairingAgent: true))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let secret = MutableCharacteristic(
            type: BluetoothUUID(0x2A19), properties: [.read], value: Data([0x42]),
            permissions: [.readEncryptionRequired])
        let dynamicSecret = MutableCharacteristic(
            type: BluetoothUUID(0x2A3D), properties: [.read], value: nil, permissions: [.readEncryptionRequired])
        let service = MutableService(type: Self.pairingService, primary: true)
        service.characteristics = [secret, dynamicSecret]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.log.contains("added") }
        #expect(server.log == ["added"])

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue,
            options: CentralManagerOptions(adapter: "hci0", requestsDefaultPairingAgent: true))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [Self.pairingService])
        try await waitUntil("scanning") { centralManager.isScanning }
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "BZK-P", CBAdvertisementDataServiceUUIDsKey: [Self.pairingService],
        ])
        try await waitUntil("advertising", timeout: .seconds(30)) { server.log.contains("advertising") }
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)

        let recorder = E2EPeripheralDelegate()
        sensor.delegate = recorder
        centralManager.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        #expect(try await PairingTools.paired(hci1, on: "hci0") == false, "paired before the encrypted read")
        sensor.discoverServices([Self.pairingService])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let remote = try #require(sensor.services?.first)
        sensor.discoverCharacteristics(nil, for: remote)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let characteristics = try #require(remote.characteristics)
        let remoteSecret = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A19) })
        let remoteDynamic = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A3D) })

        // The first read is answered "insufficient encryption"; bluetoothd raises the link's
        // security (SMP pairing, just works) and retries it.
        sensor.readValue(for: remoteSecret)
        try await waitUntil("read the encrypted static value", timeout: .seconds(60)) {
            recorder.count("value 2A19") == 1
        }
        #expect(recorder.errors.isEmpty, "\(recorder.errors)")
        #expect(remoteSecret.value == Data([0x42]))
        #expect(try await PairingTools.paired(hci1, on: "hci0") == true)
        #expect(try await PairingTools.paired(hci0, on: "hci1") == true)

        sensor.readValue(for: remoteDynamic)
        try await waitUntil("read the encrypted dynamic value", timeout: .seconds(30)) {
            recorder.count("value 2A3D") == 1
        }
        #expect(recorder.errors.isEmpty, "\(recorder.errors)")
        #expect(remoteDynamic.value == Data([0x17, 0x2A]))
        #expect(server.log.contains("read 2A3D"))

        // Linux: the bond is listed, and removing it by identifier makes bluetoothd forget it.
        try await waitUntil("bonded", timeout: .seconds(10)) { sensor.isBonded }
        #expect(centralManager.retrieveBondedPeripherals().map(\.identifier) == [sensor.identifier])
        #expect(centralManager.retrieveKnownPeripherals().contains(sensor))
        try await centralManager.removeBond(withIdentifier: sensor.identifier)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        try await waitUntil("bond removed", timeout: .seconds(10)) {
            centralManager.retrieveBondedPeripherals().isEmpty
        }
        // bluetoothd forgot the device: no object, or one that is not paired.
        #expect(try await PairingTools.paired(hci1, on: "hci0") != true)
        manager.stopAdvertising()
        manager.removeAllServices()
    }
}

/// Answers dynamic reads with `17 2A` and records what happened.
final class E2EPairingPeripheralDelegate: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.pairing.peripheral")
    private let events = Mutex<[String]>([])
    var log: [String] { events.withLock { $0 } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "added" : "add failed: \(error!)") }
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "advertising" : "advertising failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        events.withLock { $0.append("read \(request.characteristic.uuid)") }
        request.value = Data(([0x17, 0x2A] as [UInt8]).dropFirst(request.offset))
        peripheral.respond(to: request, withResult: .success)
    }
}

/// bluetoothd's view of devices, through `busctl` (independent of bluetoothctl's default adapter).
enum PairingTools {
    /// `Device1.Paired` of the device with `address` under `adapter`; nil when there is no such device.
    static func paired(_ address: String, on adapter: String) async throws -> Bool? {
        let path = "/org/bluez/\(adapter)/dev_" + address.replacingOccurrences(of: ":", with: "_")
        let result = try await Tool.run(
            "/usr/bin/busctl", ["get-property", "org.bluez", path, "org.bluez.Device1", "Paired"])
        guard result.status == 0 else { return nil }
        return result.output.contains("true")  // b true
    }

    /// Runs `body` with no keys on hci0 and hci1, and removes the keys it made on every path, so
    /// that no later test inherits them (either side would otherwise re-encrypt).
    static func withoutBonds(_ body: () async throws -> Void) async throws {
        try await removeDevices(on: "hci0")
        try await removeDevices(on: "hci1")
        do {
            try await body()
        } catch {
            try? await removeDevices(on: "hci0")
            try? await removeDevices(on: "hci1")
            throw error
        }
        try await removeDevices(on: "hci0")
        try await removeDevices(on: "hci1")
    }

    /// `Adapter1.RemoveDevice` for every device of `adapter`: its keys go too.
    static func removeDevices(on adapter: String) async throws {
        for device in try await devicePaths(on: adapter) { try await removeDevice(device) }
    }

    /// `Adapter1.RemoveDevice` for the device at `path` (`/org/bluez/hciN/dev_…`). busctl waits
    /// for bluetoothd's answer, which comes once a connected device is disconnected.
    static func removeDevice(_ path: String) async throws {
        let adapter = path.split(separator: "/").prefix(3).joined(separator: "/")
        _ = try await Tool.run(
            "/usr/bin/busctl", ["call", "org.bluez", "/\(adapter)", "org.bluez.Adapter1", "RemoveDevice", "o", path])
    }

    /// The object paths of the devices of `adapter` (`/org/bluez/hciN/dev_…`), or of every
    /// adapter when it is nil.
    static func devicePaths(on adapter: String? = nil) async throws -> [String] {
        try await Tool.output("/usr/bin/busctl", ["--list", "tree", "org.bluez"], timeout: .seconds(10))
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { path in
                let parts = path.split(separator: "/")  // org, bluez, hciN, dev_…
                return parts.count == 4 && parts[2].hasPrefix("hci") && parts[3].hasPrefix("dev_")
                    && adapter.map { parts[2] == $0 } ?? true
            }
    }
}
