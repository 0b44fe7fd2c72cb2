import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// State restoration of a central manager, on the simulated BlueZ: a manager released in the
/// middle of its work stands for a process that was killed; a new manager with the same
/// identifier stands for the relaunched process.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CentralRestorationTests {
    /// Records restoration and everything after it, in order.
    final class Restorer: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.restorer")
        let log = PosixMutex<[String]>([])
        /// What willRestoreState carried, in Sendable form.
        struct Restored: Sendable {
            var peripherals: [Peripheral]
            var scanServices: [BluetoothUUID]?
            var allowDuplicates: Bool?
        }
        let restored = PosixMutex<Restored?>(nil)
        func centralManagerDidUpdateState(_ central: CentralManager) {
            let state = central.state
            log.withLock { $0.append("state \(state)") }
        }
        func centralManager(_ central: CentralManager, willRestoreState dict: [String: Any]) {
            let peripherals = dict[CBCentralManagerRestoredStatePeripheralsKey] as? [Peripheral] ?? []
            let options = dict[CBCentralManagerRestoredStateScanOptionsKey] as? [String: Any]
            let record = Restored(
                peripherals: peripherals,
                scanServices: dict[CBCentralManagerRestoredStateScanServicesKey] as? [BluetoothUUID],
                allowDuplicates: options?[CBCentralManagerScanOptionAllowDuplicatesKey] as? Bool)
            restored.withLock { $0 = record }
            log.withLock { $0.append("restore") }
            for peripheral in peripherals { peripheral.delegate = self }
        }
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            log.withLock { $0.append("connected") }
        }
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi RSSI: Int
        ) {
            log.withLock { $0.append("discovered \(advertisementData.localName ?? "?")") }
        }
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            let hex = (characteristic.value ?? Data()).map { String(format: "%02x", $0) }.joined()
            log.withLock { $0.append("value \(characteristic.uuid) \(hex)") }
        }
        var events: [String] { log.withLock { $0 } }
        var restoredPeripherals: [Peripheral] {
            restored.withLock { $0?.peripherals ?? [] }
        }
    }

    /// The first manager of a test, watched until it is released (a block on its queue
    /// can hold it a moment after the last call, as a process takes a moment to exit).
    final class WeakManager: @unchecked Sendable {
        weak var value: CentralManager?
        func waitUntilGone() async throws {
            try await waitUntil("the first manager is released") { self.value == nil }
        }
    }

    struct Fixture {
        let bluez: SimulatedBlueZ
        let sensor: SimulatedPeripheral
        let measurement: SimulatedCharacteristic
        let store: RestorationStore
        let directory: URL

        static func make() async throws -> Fixture {
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("bluezkit-restoration-\(UUID().uuidString)")
            let bluez = try await SimulatedBlueZ.start()
            let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
            let sensor = SimulatedPeripheral(
                address: "C0:FF:EE:00:00:01", name: "Lock", serviceUUIDs: ["180D"],
                services: [
                    SimulatedService(
                        uuid: "180D",
                        characteristics: [
                            measurement, SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1]),
                        ])
                ])
            try bluez.addPeripheral(sensor)
            return Fixture(
                bluez: bluez, sensor: sensor, measurement: measurement, store: RestorationStore(directory: directory),
                directory: directory)
        }

        func manager(_ delegate: Restorer, identifier: String = "door-lock") -> CentralManager {
            CentralManager(
                delegate: delegate, queue: delegate.queue,
                options: CentralManagerOptions(
                    restoreIdentifier: identifier, busAddress: bluez.busAddress, restorationStore: store))
        }

        /// The saved files' text.
        var savedText: String {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { $0.hasSuffix(".json") }.compactMap {
                try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8)
            }.joined()
        }

        func tearDown() {
            bluez.stop()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test func aKilledCentralComesBackConnectedAndSubscribedWithoutAScan() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.tearDown() }
        var identifier: UUID?
        let released = WeakManager()
        do {
            let first = Restorer()
            let central = fixture.manager(first)
            released.value = central
            // The state changes just before the delegate hears of it: wait for the call itself.
            try await waitUntil("powered on") { !first.events.isEmpty }
            #expect(first.events == ["state poweredOn"], "no saved state: no willRestoreState")
            let lock = try await firstDiscovery(
                central, scanningFor: [BluetoothUUID(0x180D)], advertising: fixture.sensor)
            identifier = lock.identifier
            lock.delegate = first
            central.connect(lock)
            try await waitUntil("connected") { lock.state == .connected }
            lock.discoverServices([BluetoothUUID(0x180D)])
            try await waitUntil("services") { lock.services?.isEmpty == false }
            let service = try #require(lock.services?.first)
            lock.discoverCharacteristics(nil, for: service)
            try await waitUntil("characteristics") { service.characteristics?.count == 2 }
            let measurement = try #require(service.characteristics?.first { $0.uuid == BluetoothUUID(0x2A37) })
            lock.setNotifyValue(true, for: measurement)
            try await waitUntil("subscribed") { fixture.measurement.isNotifying && measurement.isNotifying }
            fixture.measurement.notify([0x00, 60])
            try await waitUntil("a value before the kill") { first.events.contains("value 2A37 003c") }
            // Saved on the restoration writer's queue, within a second.
            try await waitUntil("saved") { CentralManager.savedRestoreIdentifiers(in: fixture.store) == ["door-lock"] }
        }
        // The first manager is gone (its bus connection closed, as when a process is killed);
        // bluetoothd keeps the link.
        try await released.waitUntilGone()
        try await waitUntil("the old subscription ended") { !fixture.measurement.isNotifying }
        #expect(fixture.sensor.isConnected)

        let second = Restorer()
        let central = fixture.manager(second)
        try await waitUntil("restored and powered on") { second.events.count >= 2 }
        #expect(Array(second.events.prefix(2)) == ["restore", "state poweredOn"])
        let lock = try #require(second.restoredPeripherals.first)
        #expect(second.restoredPeripherals.count == 1)
        #expect(lock.identifier == identifier)
        let service = try #require(lock.services?.first)
        #expect(service.uuid == BluetoothUUID(0x180D))
        let measurement = try #require(service.characteristics?.first { $0.uuid == BluetoothUUID(0x2A37) })
        #expect(measurement.isNotifying)
        // The link bluetoothd kept is taken over, not torn down; the subscription comes back.
        try await waitUntil("adopted") { lock.state == .connected }
        try await waitUntil("subscribed again") { fixture.measurement.isNotifying }
        fixture.measurement.notify([0x00, 61])
        try await waitUntil("values flow again") { second.events.contains("value 2A37 003d") }
        #expect(!second.events.contains("connected"), "an adopted link is not reported as a new connection")
        #expect(!second.events.contains { $0.hasPrefix("discovered") }, "no new scan")
        withExtendedLifetime(central) {}
    }

    @Test func aPendingConnectionAndAScanAreResumed() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.tearDown() }
        let released = WeakManager()
        do {
            let first = Restorer()
            let central = fixture.manager(first)
            released.value = central
            try await waitUntil("powered on") { central.state == .poweredOn }
            let discoveries = central.discoveries()
            central.scanForPeripherals(
                withServices: [BluetoothUUID(0x180D)], options: ScanOptions(allowDuplicates: true))
            fixture.sensor.advertise()
            var iterator = discoveries.makeAsyncIterator()
            let lock = try #require(await iterator.next()?.peripheral)
            fixture.sensor.setInRange(false)
            central.connect(lock)  // pending: the lock is away
            try await waitUntil("connecting") { lock.state == .connecting }
            // Saving happens on the manager's queue after the call: wait for the file to hold it.
            try await waitUntil("the pending connection was saved") { fixture.savedText.contains("\"device\"") }
        }
        try await released.waitUntilGone()
        let second = Restorer()
        let central = fixture.manager(second)
        try await waitUntil("restored") { second.events.contains("state poweredOn") }
        let restored = try #require(second.restored.withLock { $0 })
        #expect(restored.scanServices == [BluetoothUUID(0x180D)])
        #expect(restored.allowDuplicates == true)
        try await waitUntil("the scan resumed") { central.isScanning }
        let lock = try #require(second.restoredPeripherals.first)
        try await waitUntil("pending again") { lock.state == .connecting }
        fixture.sensor.setInRange(true)
        try await waitUntil("connected when the lock came back") { second.events.contains("connected") }
        #expect(lock.state == .connected)
    }

    @Test func aSecondLiveManagerWithTheSameIdentifierIsRefused() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.tearDown() }
        let first = Restorer()
        let central = fixture.manager(first)
        try await waitUntil("powered on") { central.state == .poweredOn }
        let second = Restorer()
        let twin = fixture.manager(second)
        try await waitUntil("refused") { twin.state == .unsupported }
        #expect(twin.restorationError?.code == .identifierInUse)
        #expect(central.restorationError == nil)
        withExtendedLifetime(central) {}
    }

    @Test func unreadableSavedStateIsReportedAndTheManagerStartsFresh() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.tearDown() }
        let released = WeakManager()
        do {
            let first = Restorer()
            let central = fixture.manager(first, identifier: "../../etc/passwd")
            released.value = central
            try await waitUntil("powered on") { central.state == .poweredOn }
            central.scanForPeripherals(withServices: nil)
            try await waitUntil("saved") {
                CentralManager.savedRestoreIdentifiers(in: fixture.store) == ["../../etc/passwd"]
            }
        }
        try await released.waitUntilGone()
        let files = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)
        let file = try #require(files.first { $0.hasSuffix(".json") })
        try Data("{\"truncated".utf8).write(to: fixture.directory.appendingPathComponent(file))
        let second = Restorer()
        let central = fixture.manager(second, identifier: "../../etc/passwd")
        try await waitUntil("powered on") { central.state == .poweredOn }
        #expect(second.events == ["state poweredOn"])
        #expect(central.restorationError?.code == .unreadable)
        let kept = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)
        #expect(kept.contains { $0.hasSuffix(".unreadable") }, "the unreadable file is kept for inspection")
    }

    @Test func nothingLeftToRestoreRemovesTheSavedState() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.tearDown() }
        let delegate = Restorer()
        let central = fixture.manager(delegate)
        try await waitUntil("powered on") { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("saved") { CentralManager.savedRestoreIdentifiers(in: fixture.store) == ["door-lock"] }
        central.stopScan()
        try await waitUntil("removed") { CentralManager.savedRestoreIdentifiers(in: fixture.store).isEmpty }
    }
}
