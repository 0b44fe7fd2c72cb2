import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Subscriptions as BlueZ 5.66 reports them (StartNotify per subscribing central, StopNotify when
/// the last one leaves or its link drops), attributed to centrals, and updateValue's back-pressure.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerSubscriptionTests {
    final class Subscriptions: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.subscriptions")
        let events = PosixMutex<[String]>([])
        let readers = PosixMutex<[Central]>([])
        let ready = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            readers.withLock { $0.append(request.central) }
            request.value = Data([7])
            peripheral.respond(to: request, withResult: .success)
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            events.withLock { $0.append("subscribed \(central.identifier) \(characteristic.uuid)") }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
        ) {
            events.withLock { $0.append("unsubscribed \(central.identifier) \(characteristic.uuid)") }
        }
        func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
            ready.withLock { $0 += 1 }
        }
    }

    static let service = "0000abcd-0000-1000-8000-00805f9b34fb"

    static func publish() async throws -> (SimulatedBlueZ, PeripheralManager, Subscriptions, MutableCharacteristic) {
        let bluez = try await SimulatedBlueZ.start()
        let delegate = Subscriptions()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let measurement = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.read, .notify], value: nil, permissions: [.readable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [measurement]
        manager.add(service)
        try await waitUntil("registered") { bluez.adapters.first?.registeredApplications.count == 1 }
        return (bluez, manager, delegate, measurement)
    }

    /// The identifier a central gets, learnt from a read it makes.
    static func identity(of central: SimulatedCentral, _ delegate: Subscriptions) async throws -> UUID {
        let before = delegate.readers.withLock { $0.count }
        _ = try await central.read(serviceUUID: service, characteristicUUID: "ab01")
        try await waitUntil("read seen") { delegate.readers.withLock { $0.count } == before + 1 }
        return delegate.readers.withLock { $0.last!.identifier }
    }

    @Test func reportsWhoSubscribesAndWhoLeaves() async throws {
        let (bluez, manager, delegate, measurement) = try await Self.publish()
        defer { withExtendedLifetime((bluez, manager)) {} }
        let first = try bluez.addCentral(address: "11:22:33:44:55:01", mtu: 100)
        let firstID = try await Self.identity(of: first, delegate)
        _ = try await first.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
        try await waitUntil("first subscribed") { delegate.events.withLock { $0.count } == 1 }
        #expect(delegate.events.withLock { $0 } == ["subscribed \(firstID) AB01"])
        #expect(measurement.subscribedCentrals?.map(\.identifier) == [firstID])
        #expect(measurement.subscribedCentrals?.first?.maximumUpdateValueLength == 97)

        // A second central that only connects and subscribes is told apart from the first.
        let second = try bluez.addCentral(address: "11:22:33:44:55:02")
        _ = try await second.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
        try await waitUntil("second subscribed") { delegate.events.withLock { $0.count } == 2 }
        let secondID = try await Self.identity(of: second, delegate)
        #expect(secondID != firstID)
        #expect(delegate.events.withLock { $0.last } == "subscribed \(secondID) AB01")
        #expect(Set(measurement.subscribedCentrals?.map(\.identifier) ?? []) == [firstID, secondID])

        // The second's link drops: it leaves (bluetoothd counts one fewer, no StopNotify yet).
        await second.disconnect()
        try await waitUntil("second left") { delegate.events.withLock { $0.count } == 3 }
        #expect(delegate.events.withLock { $0.last } == "unsubscribed \(secondID) AB01")
        #expect(measurement.subscribedCentrals?.map(\.identifier) == [firstID])

        // The first unsubscribes: StopNotify, the last subscriber leaves.
        try await first.unsubscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
        try await waitUntil("first left") { delegate.events.withLock { $0.count } == 4 }
        #expect(delegate.events.withLock { $0.last } == "unsubscribed \(firstID) AB01")
        #expect(measurement.subscribedCentrals?.isEmpty == true)
    }

    @Test func subscribersLeaveWhenBluetoothdGoes() async throws {
        let (bluez, manager, delegate, _) = try await Self.publish()
        defer { withExtendedLifetime((bluez, manager)) {} }
        let central = try bluez.addCentral(address: "11:22:33:44:55:01")
        _ = try await central.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
        try await waitUntil("subscribed") { delegate.events.withLock { $0.count } == 1 }
        try await bluez.restart()
        try await waitUntil("unsubscribed") { delegate.events.withLock { $0.count } == 2 }
        #expect(delegate.events.withLock { $0.last }?.hasPrefix("unsubscribed") == true)
    }

    @Test func refusesUpdatesWhileTheBusIsNotReadingAndSaysWhenReady() async throws {
        let (bluez, manager, delegate, measurement) = try await Self.publish()
        defer { withExtendedLifetime((bluez, manager)) {} }
        let central = try bluez.addCentral(address: "11:22:33:44:55:01", mtu: 517)
        var values = try await central.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
            .makeAsyncIterator()
        // With the bus stopped, the socket fills up and then libdbus's queue: updates must be refused.
        bluez.pauseBus()
        func value(_ n: Int) -> Data {
            Data([UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + [UInt8](repeating: 0x5A, count: 500))
        }
        var sent = 0
        var refused = 0
        while sent < 100_000 {
            if manager.updateValue(value(sent), for: measurement, onSubscribedCentrals: nil) {
                sent += 1
            } else {
                refused += 1
                if refused > 1000 { break }  // refused again and again: the backlog is full
                await Task.yield()
            }
        }
        #expect(refused > 1000, "updateValue never pushed back")
        // (An earlier refusal may have been lifted while the socket still took data.)
        let readyBefore = delegate.ready.withLock { $0 }
        bluez.resumeBus()
        try await waitUntil("ready again", timeout: .seconds(60)) { delegate.ready.withLock { $0 } > readyBefore }
        #expect(manager.updateValue(Data([0xEE, 0xEE, 0xEE]), for: measurement, onSubscribedCentrals: nil))
        // Every accepted value arrives, in order; refused ones never do; the value sent after "ready" comes last.
        var received = 0
        while let next = await values.next() {
            if next == [0xEE, 0xEE, 0xEE] { break }
            #expect(Data(next) == value(received))
            received += 1
        }
        #expect(received == sent)
    }
}
