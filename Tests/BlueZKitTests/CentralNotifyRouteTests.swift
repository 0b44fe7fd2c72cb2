import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// A subscribed characteristic's route, made when the app subscribes (`StartNotify`): each
/// notification reaches the characteristic object the app subscribed to, once, after the app
/// unsubscribes and subscribes again, after the characteristic's object is removed and added
/// again at the same path (a service change), and after bluetoothd restarts; a route never
/// outlives its subscription (a read's value is then no notification).
@Suite(.timeLimit(.minutes(5))) struct CentralNotifyRouteTests {
    /// Records each value with the object it was for, notification states and service changes.
    final class RouteDelegate: PeripheralDelegate, @unchecked Sendable {
        private let log = PosixMutex<[(ObjectIdentifier?, String)]>([])
        var events: [String] { log.withLock { $0.map(\.1) } }

        /// The values `characteristic` (this very object) received, in order.
        func values(of characteristic: Characteristic) -> [[UInt8]] {
            log.withLock { log in
                log.compactMap { object, event in
                    guard object == ObjectIdentifier(characteristic), event.hasPrefix("value ") else { return nil }
                    return Array(Data(base64Encoded: String(event.dropFirst(6))) ?? Data())
                }
            }
        }

        private func record(_ object: AnyObject?, _ event: String) {
            log.withLock { $0.append((object.map(ObjectIdentifier.init), event)) }
        }

        func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
            record(nil, "services")
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
            record(service, "characteristics \(service.uuid)")
        }
        func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
            record(nil, "modified")
        }
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            record(characteristic, "value " + (characteristic.value ?? Data()).base64EncodedString())
        }
        func peripheral(
            _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
        ) {
            record(characteristic, "notifying \(characteristic.isNotifying)")
        }
    }

    struct Rig {
        let fixture: CentralFixture
        let sensor: SimulatedPeripheral
        let peripheral: Peripheral
        let delegate: RouteDelegate
    }

    static func battery(_ level: SimulatedCharacteristic) -> SimulatedService {
        SimulatedService(uuid: "180F", characteristics: [level])
    }

    /// A sensor with a readable `2A38` and a notifying battery level `2A19`, connected through
    /// `StartNotify` subscriptions, its services found.
    static func connect(level: SimulatedCharacteristic) async throws -> Rig {
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:36", name: "Routed", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1])]),
                battery(level),
            ])
        let fixture = try await CentralFixture.make(usesNotifySockets: false)
        try fixture.bluez.addPeripheral(sensor)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: sensor)
        let delegate = RouteDelegate()
        peripheral.delegate = delegate
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        return Rig(fixture: fixture, sensor: sensor, peripheral: peripheral, delegate: delegate)
    }

    /// Discovers the services and the characteristics of `uuid`; returns the first one.
    static func characteristic(_ service: UInt16, of rig: Rig) async throws -> Characteristic {
        let discoveries = rig.delegate.events.filter { $0 == "services" }.count
        rig.peripheral.discoverServices(nil)
        try await waitUntil("services") { rig.delegate.events.filter { $0 == "services" }.count > discoveries }
        let found = try #require(rig.peripheral.services?.first { $0.uuid == BluetoothUUID(service) })
        rig.peripheral.discoverCharacteristics(nil, for: found)
        try await waitUntil("characteristics") { found.characteristics != nil }
        return try #require(found.characteristics?.first)
    }

    static func subscribe(_ rig: Rig, _ characteristic: Characteristic, _ enabled: Bool) async throws {
        rig.peripheral.setNotifyValue(enabled, for: characteristic)
        try await waitUntil("notifying \(enabled)") { characteristic.isNotifying == enabled }
    }

    /// Reads `2A38` and waits for its value: every value bluetoothd sent before has been delivered.
    /// A connected sensor with a battery level characteristic (90) the central has subscribed to.
    static func subscribedLevel() async throws -> (SimulatedCharacteristic, Rig, Characteristic) {
        let simulated = SimulatedCharacteristic(uuid: "2A19", flags: ["read", "notify"], value: [90])
        let rig = try await Self.connect(level: simulated)
        let level = try await Self.characteristic(0x180F, of: rig)
        try await Self.subscribe(rig, level, true)
        return (simulated, rig, level)
    }

    /// The sensor notifies [1], and it reaches the delegate as the first value of `level`.
    static func notifyFirst(_ simulated: SimulatedCharacteristic, _ rig: Rig, _ level: Characteristic) async throws {
        #expect(rig.sensor.updateValue([1], for: simulated))
        try await waitUntil("the first notification") { rig.delegate.values(of: level) == [[1]] }
    }

    static func settle(_ rig: Rig) async throws {
        let other = try await characteristic(0x180D, of: rig)
        let before = rig.delegate.values(of: other).count
        rig.peripheral.readValue(for: other)
        try await waitUntil("the read of 2A38") { rig.delegate.values(of: other).count > before }
    }

    static func routes(_ rig: Rig) throws -> Int {
        try #require(rig.peripheral.engine).notifyRouteCount(of: rig.peripheral)
    }

    @Test func aNotificationAfterUnsubscribingAndSubscribingAgainArrivesOnce() async throws {
        let (simulated, rig, level) = try await Self.subscribedLevel()
        defer { withExtendedLifetime(rig.fixture) {} }
        #expect(try Self.routes(rig) == 1)
        try await Self.notifyFirst(simulated, rig, level)

        // Unsubscribed: no route, and a read's value (bluetoothd announces it as a Value change)
        // is the read's answer alone, not a notification besides.
        try await Self.subscribe(rig, level, false)
        #expect(try Self.routes(rig) == 0)
        rig.peripheral.readValue(for: level)
        try await waitUntil("the read") { rig.delegate.values(of: level).count >= 2 }
        try await Self.settle(rig)
        #expect(rig.delegate.values(of: level) == [[1], [1]])

        // Subscribed again: one route, each notification once.
        try await Self.subscribe(rig, level, true)
        #expect(try Self.routes(rig) == 1)
        #expect(rig.sensor.updateValue([2], for: simulated))
        try await waitUntil("the notification after subscribing again") { rig.delegate.values(of: level).count == 3 }
        try await Self.settle(rig)
        #expect(rig.delegate.values(of: level) == [[1], [1], [2]])
    }

    @Test func aNotificationAfterTheCharacteristicIsRemovedAndAddedAgainReachesTheNewObject() async throws {
        let (simulated, rig, level) = try await Self.subscribedLevel()
        defer { withExtendedLifetime(rig.fixture) {} }
        try await Self.notifyFirst(simulated, rig, level)

        // The battery service is replaced by an equal one: its objects go and come back at the
        // same paths, with new Core Bluetooth objects.
        let again = SimulatedCharacteristic(uuid: "2A19", flags: ["read", "notify"], value: [50])
        try rig.sensor.replaceService(uuid: "180F", with: Self.battery(again))
        try await waitUntil("modified") { rig.delegate.events.contains("modified") }
        #expect(try Self.routes(rig) == 0)
        let newLevel = try await Self.characteristic(0x180F, of: rig)
        #expect(newLevel !== level)
        #expect(newLevel.id == level.id)

        // Not subscribed to the new object: a read gives its answer alone, to the new object.
        rig.peripheral.readValue(for: newLevel)
        try await waitUntil("the read") { rig.delegate.values(of: newLevel) == [[50]] }
        try await Self.settle(rig)
        #expect(rig.delegate.values(of: newLevel) == [[50]])
        #expect(rig.delegate.values(of: level) == [[1]])

        // Subscribed to it: its notifications reach it, once each, and never the old object.
        try await Self.subscribe(rig, newLevel, true)
        #expect(rig.sensor.updateValue([7], for: again))
        try await waitUntil("the notification") { rig.delegate.values(of: newLevel).count == 2 }
        try await Self.settle(rig)
        #expect(rig.delegate.values(of: newLevel) == [[50], [7]])
        #expect(rig.delegate.values(of: level) == [[1]])
    }

    @Test func aNotificationAfterBluetoothdRestartsReachesTheNewSubscription() async throws {
        let (simulated, rig, level) = try await Self.subscribedLevel()
        defer { withExtendedLifetime(rig.fixture) {} }
        try await Self.notifyFirst(simulated, rig, level)

        try await rig.fixture.bluez.restart(downtime: .milliseconds(100))
        try await waitUntil("disconnected") { rig.peripheral.state == .disconnected }
        #expect(try Self.routes(rig) == 0)
        try await waitUntil("powered on again") { rig.fixture.central.state == .poweredOn }
        rig.fixture.central.connect(rig.peripheral)
        try await waitUntil("connected again once the sensor is seen") {
            rig.sensor.advertise()
            return rig.peripheral.state == .connected
        }
        let newLevel = try await Self.characteristic(0x180F, of: rig)
        #expect(newLevel !== level)
        try await Self.subscribe(rig, newLevel, true)
        #expect(try Self.routes(rig) == 1)
        #expect(rig.sensor.updateValue([3], for: simulated))
        try await waitUntil("the notification after the restart") { rig.delegate.values(of: newLevel) == [[3]] }
        try await Self.settle(rig)
        #expect(rig.delegate.values(of: newLevel) == [[3]])
        #expect(rig.delegate.values(of: level) == [[1]])
    }
}
