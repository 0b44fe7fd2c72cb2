import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// The peripheral role on a bluetoothd with a notify socket per subscribing central (5.79 and
/// later, simulated as 5.82): subscriptions name the exact central, `updateValue` reaches the
/// centrals named and no others, and indications are confirmed per central.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerPerCentralTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.per-central")
        let subscribed = PosixMutex<[Central]>([])
        let unsubscribed = PosixMutex<[Central]>([])
        let ready = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            subscribed.withLock { $0.append(central) }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
        ) {
            unsubscribed.withLock { $0.append(central) }
        }
        func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
            ready.withLock { $0 += 1 }
        }
    }

    static let service = "0000abcd-0000-1000-8000-00805f9b34fb"

    static func publish(_ properties: CharacteristicProperties, version: SimulatedBlueZ.Version = .bluez5_82)
        async throws -> (SimulatedBlueZ, PeripheralManager, Recorder, MutableCharacteristic)
    {
        let bluez = try await SimulatedBlueZ.start(options: .init(version: version))
        let delegate = Recorder()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: properties, value: nil, permissions: [.readable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [characteristic]
        manager.add(service)
        try await waitUntil("registered") { bluez.adapters.first?.registeredApplications.count == 1 }
        return (bluez, manager, delegate, characteristic)
    }

    /// Subscribes `central` and returns the `Central` the manager reported for it.
    static func subscribe(_ central: SimulatedCentral, _ delegate: Recorder) async throws
        -> (Central, AsyncStream<[UInt8]>.AsyncIterator)
    {
        let before = delegate.subscribed.withLock { $0.count }
        let values = try await central.subscribe(serviceUUID: service, characteristicUUID: "ab01")
        try await waitUntil("subscribed") { delegate.subscribed.withLock { $0.count } == before + 1 }
        return (delegate.subscribed.withLock { $0.last! }, values.makeAsyncIterator())
    }

    @Test func offersASocketPerCentralOnlyWhereBluetoothdHasThem() async throws {
        for version in SimulatedBlueZ.Version.allCases {
            let (bluez, manager, _, _) = try await Self.publish([.notify], version: version)
            let offered = bluez.adapters.first?.registeredApplications.first?.services.first?.characteristics.first?
                .offersAcquireNotify
            #expect(offered == (version >= .bluez5_82), "\(version)")
            withExtendedLifetime((bluez, manager)) {}
        }
    }

    @Test func eachCentralGetsExactlyWhatWasSentToIt() async throws {
        let (bluez, manager, delegate, characteristic) = try await Self.publish([.notify])
        defer { withExtendedLifetime((bluez, manager)) {} }
        let centrals = try (1...3).map { try bluez.addCentral(address: "11:22:33:44:55:0\($0)", mtu: UInt16(50 * $0)) }
        var subscribed: [Central] = []
        var streams: [AsyncStream<[UInt8]>.AsyncIterator] = []
        for central in centrals {
            let (reported, stream) = try await Self.subscribe(central, delegate)
            subscribed.append(reported)
            streams.append(stream)
        }
        #expect(Set(subscribed.map(\.identifier)).count == 3)
        // The MTU comes with the socket: no read or write needed.
        #expect(subscribed.map(\.maximumUpdateValueLength) == [47, 97, 147])
        #expect(Set(characteristic.subscribedCentrals?.map(\.identifier) ?? []) == Set(subscribed.map(\.identifier)))

        for (index, central) in subscribed.enumerated() {
            #expect(manager.updateValue(Data([UInt8(index)]), for: characteristic, onSubscribedCentrals: [central]))
        }
        #expect(manager.updateValue(Data([0xAA]), for: characteristic, onSubscribedCentrals: nil))
        #expect(
            manager.updateValue(
                Data([0xBB]), for: characteristic, onSubscribedCentrals: [subscribed[0], subscribed[2]]))
        // A value longer than a named central's MTU allows is refused; one that fits goes.
        #expect(!manager.updateValue(Data(count: 48), for: characteristic, onSubscribedCentrals: [subscribed[0]]))
        #expect(manager.updateValue(Data(count: 48), for: characteristic, onSubscribedCentrals: [subscribed[1]]))
        for index in 0..<3 {
            var got: [[UInt8]] = []
            let expected: [[UInt8]] = [[UInt8(index)], [0xAA], index == 1 ? [UInt8](repeating: 0, count: 48) : [0xBB]]
            while got.count < expected.count, let value = await streams[index].next() { got.append(value) }
            #expect(got == expected, "central \(index + 1)")
        }

        // One central leaves: exactly that one is reported, and later values skip it.
        try await centrals[1].unsubscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
        try await waitUntil("unsubscribed") { delegate.unsubscribed.withLock { $0.count } == 1 }
        #expect(delegate.unsubscribed.withLock { $0.map(\.identifier) } == [subscribed[1].identifier])
        #expect(manager.updateValue(Data([0xCC]), for: characteristic, onSubscribedCentrals: nil))
        for index in [0, 2] { #expect(await streams[index].next() == [0xCC]) }

        // A link that drops ends its subscription, for that central only.
        await centrals[2].disconnect()
        try await waitUntil("link dropped") { delegate.unsubscribed.withLock { $0.count } == 2 }
        #expect(delegate.unsubscribed.withLock { $0.last?.identifier } == subscribed[2].identifier)
        #expect(characteristic.subscribedCentrals?.map(\.identifier) == [subscribed[0].identifier])
    }

    @Test func indicationsAreConfirmedPerCentral() async throws {
        let (bluez, manager, delegate, characteristic) = try await Self.publish([.indicate])
        defer { withExtendedLifetime((bluez, manager)) {} }
        let slow = try bluez.addCentral(address: "11:22:33:44:55:01")
        let quick = try bluez.addCentral(address: "11:22:33:44:55:02")
        let (slowCentral, _) = try await Self.subscribe(slow, delegate)
        let (quickCentral, _) = try await Self.subscribe(quick, delegate)
        slow.confirmsIndications = false
        // The first confirmation read from a socket shows bluetoothd confirms through sockets (5.80);
        // from then on an indication to the slow central, which holds its confirmations, is paced.
        #expect(manager.updateValue(Data([1]), for: characteristic, onSubscribedCentrals: [quickCentral]))
        try await pollUntil("an indication waits for the slow central") {
            !manager.updateValue(Data([2]), for: characteristic, onSubscribedCentrals: [slowCentral])
        }
        // The quick central is not held up by the slow one.
        #expect(manager.updateValue(Data([3]), for: characteristic, onSubscribedCentrals: [quickCentral]))
        #expect(!manager.updateValue(Data([4]), for: characteristic, onSubscribedCentrals: [slowCentral]))
        #expect(delegate.ready.withLock { $0 } == 0)
        slow.confirmHeldIndications()
        try await waitUntil("ready") { delegate.ready.withLock { $0 } == 1 }
        #expect(manager.updateValue(Data([4]), for: characteristic, onSubscribedCentrals: [slowCentral]))
    }
}
