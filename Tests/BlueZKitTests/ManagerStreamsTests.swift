import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// `states()`, `disconnections()` and `subscriptions()`: each yields what the delegate hears, in
/// the same order; the state streams start with the current state.
@Suite(.timeLimit(.minutes(2))) struct ManagerStreamsTests {
    @Test func aCentralsStatesStartWithTheCurrentStateAndFollowThePower() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        let early = Collected(central.states())
        try await waitUntil("powered on") { early.values.last == .poweredOn }
        // `.unknown` first unless the manager was powered on before the stream was made.
        #expect(early.values == [.unknown, .poweredOn] || early.values == [.poweredOn], "\(early.values)")
        let late = Collected(central.states())
        try await waitUntil("the current state") { late.values == [.poweredOn] }

        let adapter = try #require(bluez.adapters.first)
        adapter.setPowered(false)
        try await waitUntil("powered off") { late.values.last == .poweredOff && early.values.last == .poweredOff }
        adapter.setPowered(true)
        try await waitUntil("powered on again") { late.values.last == .poweredOn }
        #expect(late.values == [.poweredOn, .poweredOff, .poweredOn])
        // The delegate heard each state before the streams.
        #expect(Array(delegate.states.suffix(2)) == [.poweredOff, .poweredOn])
        // A consumer that stops leaves the others their values.
        late.cancel()
        try await waitUntil("the cancelled consumer's stream finished") { late.isFinished }
        adapter.setPowered(false)
        try await waitUntil("the other stream goes on") { early.values.last == .poweredOff }
        withExtendedLifetime(central) {}
    }

    @Test func disconnectionsReportLostCancelledAndReconnectingLinks() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        let disconnections = Collected(central.disconnections())

        try await central.connect(to: peripheral)
        sensor.dropConnection()
        try await waitUntil("the lost link") { disconnections.values.count == 1 }
        let lost = try #require(disconnections.values.first)
        #expect(lost.peripheral === peripheral)
        #expect(lost.error != nil)
        #expect(!lost.isReconnecting)

        try await central.connect(to: peripheral)
        try await central.disconnect(from: peripheral)
        try await waitUntil("the cancelled link") { disconnections.values.count == 2 }
        #expect(disconnections.values[1].error == nil)
        #expect(!disconnections.values[1].isReconnecting)

        try await central.connect(to: peripheral, options: [CBConnectPeripheralOptionEnableAutoReconnect: true])
        sensor.dropConnection()
        try await waitUntil("the link lost while reconnecting") { disconnections.values.count == 3 }
        #expect(disconnections.values[2].isReconnecting)
        #expect(disconnections.values[2].error != nil)
        try await waitUntil("reconnected") { peripheral.state == .connected }
        try await central.disconnect(from: peripheral)
        try await waitUntil("the last cancel") { disconnections.values.count == 4 }
        #expect(disconnections.values.allSatisfy { $0.peripheral === peripheral })
        #expect(!disconnections.isFinished)
    }

    @Test func aPeripheralManagersStatesAndSubscriptions() async throws {
        typealias Subscribing = PeripheralManagerSubscriptionTests
        let (bluez, manager, delegate, measurement) = try await Subscribing.publish()
        defer { bluez.stop() }
        let states = Collected(manager.states())
        try await waitUntil("the current state") { states.values == [.poweredOn] }
        let subscriptions = Collected(manager.subscriptions())

        let central = try bluez.addCentral(address: "11:22:33:44:55:07", mtu: 64)
        let identifier = try await Subscribing.identity(of: central, delegate)
        _ = try await central.subscribe(serviceUUID: Subscribing.service, characteristicUUID: "ab01")
        try await waitUntil("subscribed") { subscriptions.values.count == 1 }
        // Without a delegate too.
        manager.delegate = nil
        try await central.unsubscribe(serviceUUID: Subscribing.service, characteristicUUID: "ab01")
        try await waitUntil("unsubscribed") { subscriptions.values.count == 2 }
        let (subscribed, unsubscribed) = (subscriptions.values[0], subscriptions.values[1])
        #expect(subscribed.isSubscribed && !unsubscribed.isSubscribed)
        #expect(subscribed.central.identifier == identifier && unsubscribed.central.identifier == identifier)
        #expect(subscribed.characteristic === measurement && unsubscribed.characteristic === measurement)
        #expect(subscribed.central.maximumUpdateValueLength == 61)
        #expect(delegate.events.withLock { $0 } == ["subscribed \(identifier) AB01"])

        try #require(bluez.adapters.first).setPowered(false)
        try await waitUntil("powered off") { states.values.last == .poweredOff }
        #expect(states.values == [.poweredOn, .poweredOff])
    }
}
