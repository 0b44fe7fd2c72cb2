import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// A bonded central keeps its subscription across links, as in Core Bluetooth: bluetoothd keeps
/// its CCC value and does not ask the application again when it comes back, so the manager
/// reports it subscribed again itself and, where the central's socket is gone (5.79 and later),
/// sends its values as `PropertiesChanged`.
@Suite(.timeLimit(.minutes(2))) struct PeripheralManagerBondedCentralTests {
    typealias Fixture = PeripheralManagerPerCentralTests
    static let service = Fixture.service

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func aReturningBondedCentralIsSubscribedAgainAndGetsValues(version: SimulatedBlueZ.Version) async throws {
        let (bluez, manager, delegate, characteristic) = try await Fixture.publish([.notify], version: version)
        defer { withExtendedLifetime((bluez, manager)) {} }
        let central = try bluez.addCentral(address: "11:22:33:44:55:01", mtu: 100)
        #expect(central.bond())
        let (reported, _) = try await Fixture.subscribe(central, delegate)

        await central.disconnect()
        try await waitUntil("unsubscribed with the link") { delegate.unsubscribed.withLock { $0.count } == 1 }
        #expect(characteristic.subscribedCentrals?.isEmpty ?? true)

        // Back, and subscribing again as apps do: bluetoothd calls nothing on the application.
        #expect(central.connect())
        try await waitUntil("subscribed again") { delegate.subscribed.withLock { $0.count } == 2 }
        #expect(delegate.subscribed.withLock { $0.last?.identifier } == reported.identifier)
        #expect(characteristic.subscribedCentrals?.map(\.identifier) == [reported.identifier])
        var values = try await central.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
            .makeAsyncIterator()
        #expect(manager.updateValue(Data([0x52]), for: characteristic, onSubscribedCentrals: nil))
        #expect(await values.next() == [0x52])
        #expect(manager.updateValue(Data([0x53]), for: characteristic, onSubscribedCentrals: [reported]))
        #expect(await values.next() == [0x53])
        #expect(delegate.subscribed.withLock { $0.count } == 2, "no second report for the same return")
    }

    @Test func anotherCentralWithASocketGetsEachValueOnce() async throws {
        let (bluez, manager, delegate, characteristic) = try await Fixture.publish([.notify], version: .bluez5_82)
        defer { withExtendedLifetime((bluez, manager)) {} }
        let bonded = try bluez.addCentral(address: "11:22:33:44:55:01", mtu: 100)
        #expect(bonded.bond())
        _ = try await Fixture.subscribe(bonded, delegate)
        let other = try bluez.addCentral(address: "11:22:33:44:55:02", mtu: 100)
        var (otherCentral, otherValues) = try await Fixture.subscribe(other, delegate)

        await bonded.disconnect()
        try await waitUntil("unsubscribed with the link") { delegate.unsubscribed.withLock { $0.count } == 1 }
        #expect(bonded.connect())
        try await waitUntil("subscribed again") { delegate.subscribed.withLock { $0.count } == 3 }
        var values = try await bonded.subscribe(serviceUUID: Self.service, characteristicUUID: "ab01")
            .makeAsyncIterator()
        #expect(manager.updateValue(Data([0x01]), for: characteristic, onSubscribedCentrals: nil))
        #expect(manager.updateValue(Data([0x02]), for: characteristic, onSubscribedCentrals: nil))
        #expect(await values.next() == [0x01])
        #expect(await values.next() == [0x02])
        // Sockets were skipped for those values: the other central has each once.
        #expect(await otherValues.next() == [0x01])
        #expect(await otherValues.next() == [0x02])
        // A value for the other central alone goes through its socket, and is the next it gets.
        #expect(manager.updateValue(Data([0x03]), for: characteristic, onSubscribedCentrals: [otherCentral]))
        #expect(await otherValues.next() == [0x03])
    }

    @Test func aCentralThatIsNotBondedIsNotReportedBack() async throws {
        let (bluez, manager, delegate, characteristic) = try await Fixture.publish([.notify], version: .bluez5_82)
        defer { withExtendedLifetime((bluez, manager)) {} }
        let central = try bluez.addCentral(address: "11:22:33:44:55:01", mtu: 100)
        let (first, _) = try await Fixture.subscribe(central, delegate)
        await central.disconnect()
        try await waitUntil("unsubscribed with the link") { delegate.unsubscribed.withLock { $0.count } == 1 }
        #expect(central.connect())
        // Another central subscribes after the link is back: its report comes after any the
        // return would have caused (the manager handles bluetoothd's messages in order).
        let other = try bluez.addCentral(address: "11:22:33:44:55:02", mtu: 100)
        let (second, _) = try await Fixture.subscribe(other, delegate)
        #expect(delegate.subscribed.withLock { $0.map(\.identifier) } == [first.identifier, second.identifier])
        #expect(characteristic.subscribedCentrals?.map(\.identifier) == [second.identifier])
    }
}
