import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

/// Releasing a manager ends what its async API handed out: `discoveries()`, `notifications(of:)`,
/// `states()`, `disconnections()`, `subscriptions()`
/// and `requests()` finish, and a peripheral's async call still waiting throws.
@Suite(.timeLimit(.minutes(1))) struct StreamsEndWithTheirManagerTests {
    final class Released<Manager: AnyObject>: @unchecked Sendable {
        private let lock = NSLock()
        private weak var manager: Manager?
        init(_ manager: Manager) { self.manager = manager }
        var isReleased: Bool { lock.withLock { manager == nil } }
    }

    /// How a consumer's stream or call ended: nil while it has not.
    final class Ending: Sendable {
        let outcome = PosixMutex<String?>(nil)
        func end(_ how: String) { outcome.withLock { $0 = how } }
        var how: String? { outcome.withLock { $0 } }
    }

    @Test func aReleasedCentralManagerEndsItsStreamsAndWaits() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurementSource) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (discoveries, notifications, read) = (Ending(), Ending(), Ending())
        let released: Released<CentralManager>
        let peripheral: Peripheral
        do {
            let (central, _, found) = try await CentralAsyncTests.found(bluez, sensor)
            released = Released(central)
            peripheral = found
            try await central.connect(to: found)
            let service = try #require(try await found.discoverServices(matching: [BluetoothUUID(0x180D)]).first)
            let characteristics = try await found.discoverCharacteristics(matching: nil, in: service)
            let measurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })
            let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })

            let scan = central.discoveries()
            Task {
                for await _ in scan {}
                discoveries.end("finished")
            }
            let values = found.notifications(of: measurement)
            Task {
                do {
                    for try await _ in values {}
                    notifications.end("finished")
                } catch { notifications.end("threw \(type(of: error))") }
            }
            try await waitUntil("subscribed") { measurementSource.isNotifying }
            // bluetoothd never answers this read: the manager goes while it waits.
            bluez.inject(.noReply, for: .readValue)
            Task {
                do {
                    _ = try await found.readValue(of: location)
                    read.end("returned")
                } catch { read.end("threw \(type(of: error))") }
            }
            try await waitUntil("the read reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        }
        try await waitUntil("the manager is released") { released.isReleased }
        try await waitUntil("discoveries() finished") { discoveries.how != nil }
        try await waitUntil("notifications(of:) ended") { notifications.how != nil }
        try await waitUntil("the read ended") { read.how != nil }
        #expect(notifications.how == "threw BluetoothError")
        #expect(read.how == "threw BluetoothError")
        withExtendedLifetime(peripheral) {}
    }

    @Test func aReleasedPeripheralManagerFinishesItsRequestStreams() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let requests = Ending()
        let released: Released<PeripheralManager>
        do {
            let manager = PeripheralManager(
                delegate: nil, queue: DispatchQueue(label: "test.released"),
                options: PeripheralManagerOptions(busAddress: bluez.busAddress))
            released = Released(manager)
            try await waitUntil("powered on") { manager.state == .poweredOn }
            let stream = manager.requests()
            Task {
                for await _ in stream {}
                requests.end("finished")
            }
        }
        try await waitUntil("the manager is released") { released.isReleased }
        try await waitUntil("requests() finished") { requests.how != nil }
    }

    @Test func aReleasedCentralManagerFinishesItsStateAndDisconnectionStreams() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let released: Released<CentralManager>
        let states: Collected<ManagerState>
        let disconnections: Collected<CentralManager.Disconnection>
        do {
            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "test.released.central"),
                options: CentralManagerOptions(busAddress: bluez.busAddress))
            released = Released(central)
            states = Collected(central.states())
            disconnections = Collected(central.disconnections())
            try await waitUntil("powered on") { central.state == .poweredOn }
        }
        try await waitUntil("the manager is released") { released.isReleased }
        try await waitUntil("states() finished") { states.isFinished }
        try await waitUntil("disconnections() finished") { disconnections.isFinished }
        #expect(states.values.last == .poweredOn)
    }

    @Test func aReleasedPeripheralManagerFinishesItsStateAndSubscriptionStreams() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let released: Released<PeripheralManager>
        let states: Collected<ManagerState>
        let subscriptions: Collected<PeripheralManager.Subscription>
        do {
            let manager = PeripheralManager(
                delegate: nil, queue: DispatchQueue(label: "test.released.peripheral"),
                options: PeripheralManagerOptions(busAddress: bluez.busAddress))
            released = Released(manager)
            states = Collected(manager.states())
            subscriptions = Collected(manager.subscriptions())
            try await waitUntil("powered on") { manager.state == .poweredOn }
        }
        try await waitUntil("the manager is released") { released.isReleased }
        try await waitUntil("states() finished") { states.isFinished }
        try await waitUntil("subscriptions() finished") { subscriptions.isFinished }
        #expect(states.values.last == .poweredOn)
    }
}
