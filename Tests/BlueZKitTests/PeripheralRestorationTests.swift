import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// State restoration of a peripheral manager on the simulated BlueZ: a released manager stands
/// for a killed process, a new one with the same identifier for the relaunched process.
@Suite(.timeLimit(.minutes(5))) struct PeripheralRestorationTests {
    final class Publisher: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.publisher")
        let log = PosixMutex<[String]>([])
        let restoredServices = PosixMutex<[MutableService]>([])
        let restoredName = PosixMutex<String?>(nil)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
            let state = peripheral.state
            log.withLock { $0.append("state \(state)") }
        }
        func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any]) {
            let services = dict[CBPeripheralManagerRestoredStateServicesKey] as? [MutableService] ?? []
            let advertisement = dict[CBPeripheralManagerRestoredStateAdvertisementDataKey] as? [String: Any]
            let name = advertisement?[CBAdvertisementDataLocalNameKey] as? String
            restoredServices.withLock { $0 = services }
            for characteristic in services.flatMap({ ($0.characteristics as? [MutableCharacteristic]) ?? [] }) {
                let centrals = characteristic.subscribedCentrals ?? []
                restoredSubscribers.withLock { $0[characteristic.uuid] = centrals }
            }
            restoredName.withLock { $0 = name }
            log.withLock { $0.append("restore") }
        }
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            log.withLock { $0.append("added \(service.uuid)") }
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
            log.withLock { $0.append("advertising") }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            log.withLock { $0.append("subscribed \(characteristic.uuid)") }
            subscribers.withLock { $0.append(central) }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
        ) {
            log.withLock { $0.append("unsubscribed \(central.identifier) \(characteristic.uuid)") }
        }
        /// The centrals `didSubscribeTo` reported, in order.
        let subscribers = PosixMutex<[Central]>([])
        /// The subscribed centrals of each restored characteristic, as `willRestoreState` saw them.
        let restoredSubscribers = PosixMutex<[BluetoothUUID: [Central]]>([:])
        var events: [String] { log.withLock { $0 } }
    }

    final class WeakManager: @unchecked Sendable {
        weak var value: PeripheralManager?
    }

    /// A simulated BlueZ and manager options with a restore identifier and a store in a fresh
    /// temporary directory; `tearDown` stops and removes both.
    struct Rig {
        let directory: URL
        let bluez: SimulatedBlueZ
        let options: PeripheralManagerOptions
        var store: RestorationStore { RestorationStore(directory: directory) }

        static func start(_ identifier: String) async throws -> Rig {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "bluezkit-prest-\(UUID().uuidString)")
            let bluez = try await SimulatedBlueZ.start()
            return Rig(
                directory: directory, bluez: bluez,
                options: PeripheralManagerOptions(
                    restoreIdentifier: identifier, busAddress: bluez.busAddress,
                    restorationStore: RestorationStore(directory: directory)))
        }

        func tearDown() {
            bluez.stop()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    @Test func aRelaunchedPeripheralPublishesAndAdvertisesAgainOnItsOwn() async throws {
        let rig = try await Rig.start("heart-rate-sensor")
        defer { rig.tearDown() }
        let (bluez, options) = (rig.bluez, rig.options)
        let adapter = try #require(bluez.adapters.first)
        let released = WeakManager()
        do {
            let first = Publisher()
            let manager = try await Self.publish(first, options: options)
            released.value = manager
            manager.startAdvertising([
                CBAdvertisementDataLocalNameKey: "HRM", CBAdvertisementDataServiceUUIDsKey: [BluetoothUUID(0x180D)],
            ])
            try await waitUntil("advertising") { first.events.contains("advertising") }
            #expect(PeripheralManager.savedRestoreIdentifiers(in: rig.store) == ["heart-rate-sensor"])
            #expect(CentralManager.savedRestoreIdentifiers(in: rig.store).isEmpty)
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        try await waitUntil("bluetoothd dropped its registrations") {
            adapter.registeredApplications.isEmpty && adapter.registeredAdvertisements.isEmpty
        }

        let second = Publisher()
        let manager = PeripheralManager(delegate: second, queue: second.queue, options: options)
        try await waitUntil("restored and powered on") { second.events.count >= 2 }
        #expect(Array(second.events.prefix(2)) == ["restore", "state poweredOn"])
        #expect(second.restoredName.withLock { $0 } == "HRM")
        let service = try #require(second.restoredServices.withLock { $0.first })
        #expect(service.uuid == BluetoothUUID(0x180D))
        #expect(service.characteristics?.map(\.uuid) == [BluetoothUUID(0x2A37), BluetoothUUID(0x2A38)])
        #expect(service.characteristics?.last?.value == Data([0x03]))
        try await waitUntil("published and advertising again") {
            adapter.registeredApplications.count == 1 && adapter.registeredAdvertisements.first?.localName == "HRM"
        }
        try await waitUntil("isAdvertising") { manager.isAdvertising }
        #expect(!second.events.contains { $0.hasPrefix("added") }, "restored services are not re-reported as added")
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x03])
        _ = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try await waitUntil("a subscription to the restored characteristic") {
            second.events.contains("subscribed 2A37")
        }
        let measurement = try #require(service.characteristics?.first as? MutableCharacteristic)
        #expect(manager.updateValue(Data([0, 70]), for: measurement, onSubscribedCentrals: nil))
    }

    /// A powered-on manager that has published a Heart Rate service (a notifying measurement,
    /// a static body sensor location).
    static func publish(_ delegate: Publisher, options: PeripheralManagerOptions) async throws -> PeripheralManager {
        let manager = PeripheralManager(delegate: delegate, queue: delegate.queue, options: options)
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
        service.characteristics = [
            MutableCharacteristic(type: BluetoothUUID(0x2A37), properties: [.notify], value: nil, permissions: []),
            MutableCharacteristic(
                type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x03]), permissions: [.readable]),
        ]
        manager.add(service)
        try await waitUntil("added") { delegate.events.contains("added 180D") }
        return manager
    }

    @Test func subscribedCentralsAreRestoredThenReportedGoneUntilTheySubscribeAgain() async throws {
        let rig = try await Rig.start("subscribed-sensor")
        defer { rig.tearDown() }
        let (bluez, options) = (rig.bluez, rig.options)
        let adapter = try #require(bluez.adapters.first)
        let central = try bluez.addCentral(address: "11:22:33:44:55:77", mtu: 100)
        let released = WeakManager()
        let identifier: UUID
        do {
            let first = Publisher()
            let manager = try await Self.publish(first, options: options)
            released.value = manager
            // A read tells the manager the central's MTU (100: 97 bytes per notification).
            #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x03])
            _ = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            try await waitUntil("subscribed") { first.events.contains("subscribed 2A37") }
            identifier = try #require(first.subscribers.withLock { $0.first?.identifier })
        }
        // The process ends with the central subscribed and its link up.
        try await waitUntil("the first manager is released") { released.value == nil }
        try await waitUntil("bluetoothd dropped the application") { adapter.registeredApplications.isEmpty }
        #expect(central.isConnected)

        let second = Publisher()
        let manager = PeripheralManager(delegate: second, queue: second.queue, options: options)
        try await waitUntil("restored, powered on, the subscription reported gone") { second.events.count >= 3 }
        #expect(Array(second.events.prefix(3)) == ["restore", "state poweredOn", "unsubscribed \(identifier) 2A37"])
        let restored = second.restoredSubscribers.withLock { $0 }
        #expect(restored[BluetoothUUID(0x2A37)]?.map(\.identifier) == [identifier])
        #expect(restored[BluetoothUUID(0x2A37)]?.first?.maximumUpdateValueLength == 97)
        #expect(restored[BluetoothUUID(0x2A38)]?.isEmpty == true)
        let measurement = try #require(
            second.restoredServices.withLock { $0.first?.characteristics?.first } as? MutableCharacteristic)
        #expect(measurement.subscribedCentrals?.isEmpty == true, "bluetoothd ended the subscription")

        // The central subscribes again, without a request first: the manager knew its link from
        // the start (it was connected before the manager), so the subscription is its own.
        try await waitUntil("published again") { adapter.registeredApplications.count == 1 }
        _ = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try await waitUntil("subscribed again") { second.events.contains("subscribed 2A37") }
        #expect(second.subscribers.withLock { $0.map(\.identifier) } == [identifier])
        #expect(measurement.subscribedCentrals?.map(\.identifier) == [identifier])
        #expect(manager.updateValue(Data([0, 72]), for: measurement, onSubscribedCentrals: nil))

        // What is saved now is the new subscription: a third process restores it again.
        withExtendedLifetime(manager) {}
        try await waitUntil("the new subscription saved") {
            Self.savedSubscribers(in: rig.store).contains(identifier.uuidString)
        }
    }

    @Test func hostileSubscribedCentralsInTheFileAreKeptInRange() async throws {
        let rig = try await Rig.start("hostile")
        defer { rig.tearDown() }
        let (directory, options) = (rig.directory, rig.options)
        let released = WeakManager()
        do {
            let first = Publisher()
            released.value = try await Self.publish(first, options: options)
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        // Edit the saved file: two centrals with lengths no link has, one without the key at all.
        let file = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).first { $0.hasSuffix(".json") })
        let url = directory.appendingPathComponent(file)
        var envelope = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var payload = try #require(envelope["payload"] as? [String: Any])
        var services = try #require(payload["services"] as? [[String: Any]])
        var characteristics = try #require(services[0]["characteristics"] as? [[String: Any]])
        let low = UUID()
        let high = UUID()
        characteristics[0]["subscribedCentrals"] = [
            ["identifier": low.uuidString, "maximumUpdateValueLength": -5],
            ["identifier": high.uuidString, "maximumUpdateValueLength": 1_000_000],
        ]
        characteristics[1]["subscribedCentrals"] = nil
        services[0]["characteristics"] = characteristics
        payload["services"] = services
        envelope["payload"] = payload
        try JSONSerialization.data(withJSONObject: envelope).write(to: url)

        let second = Publisher()
        let manager = PeripheralManager(delegate: second, queue: second.queue, options: options)
        defer { withExtendedLifetime(manager) {} }
        try await waitUntil("restored and both reported gone") { second.events.count >= 4 }
        #expect(manager.restorationError == nil)
        let restored = second.restoredSubscribers.withLock { $0[BluetoothUUID(0x2A37)] ?? [] }
        #expect(restored.map(\.identifier) == [low, high])
        #expect(restored.map(\.maximumUpdateValueLength) == [20, 514])
        #expect(Set(second.events.dropFirst(2)) == ["unsubscribed \(low) 2A37", "unsubscribed \(high) 2A37"])
    }

    /// The identifiers of the centrals saved as subscribed, read from the store's file.
    static func savedSubscribers(in store: RestorationStore) -> [String] {
        let directory = store.directory.path
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: directory),
            let file = files.first(where: { $0.hasSuffix(".json") }),
            let data = FileManager.default.contents(atPath: directory + "/" + file),
            let text = String(data: data, encoding: .utf8)
        else { return [] }
        return text.split(separator: "\"").map(String.init).filter { UUID(uuidString: $0) != nil }
    }
}
