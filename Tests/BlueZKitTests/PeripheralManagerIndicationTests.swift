import BlueZKitTesting
import DBus
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// updateValue on a characteristic that only indicates waits for every subscriber's confirmation
/// (bluetoothd's `Confirm()`), and values too long for a central are refused, not cut.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerIndicationTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.indications")
        let subscriptions = PosixMutex(0)
        let ready = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            request.value = Data([7])
            peripheral.respond(to: request, withResult: .success)
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            subscriptions.withLock { $0 += 1 }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
        ) {
            subscriptions.withLock { $0 -= 1 }
        }
        func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
            ready.withLock { $0 += 1 }
        }
        /// Waits until every delegate call queued so far has run.
        func drain() async { await withCheckedContinuation { c in queue.async { c.resume() } } }
    }

    /// A published service: `AB01` only indicates, `AB02` notifies and indicates (both readable).
    struct Rig {
        let bluez: SimulatedBlueZ
        let manager: PeripheralManager
        let delegate: Recorder
        let indicating: MutableCharacteristic
        let notifying: MutableCharacteristic

        static func start() async throws -> Rig {
            let bluez = try await SimulatedBlueZ.start()
            let delegate = Recorder()
            let manager = PeripheralManager(
                delegate: delegate, queue: delegate.queue,
                options: PeripheralManagerOptions(busAddress: bluez.busAddress))
            try await waitUntil("powered on") { manager.state == .poweredOn }
            let indicating = MutableCharacteristic(
                type: BluetoothUUID(0xAB01), properties: [.read, .indicate], value: nil, permissions: [.readable])
            let notifying = MutableCharacteristic(
                type: BluetoothUUID(0xAB02), properties: [.read, .notify, .indicate], value: nil,
                permissions: [.readable])
            let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
            service.characteristics = [indicating, notifying]
            manager.add(service)
            try await waitUntil("registered") { bluez.adapters.first?.registeredApplications.count == 1 }
            return Rig(bluez: bluez, manager: manager, delegate: delegate, indicating: indicating, notifying: notifying)
        }

        /// A connected central whose MTU the manager learnt from a read (the read also orders:
        /// everything the simulator sent before it has been handled when it returns).
        func central(_ last: Int, mtu: UInt16 = 23) async throws -> SimulatedCentral {
            let central = try bluez.addCentral(address: String(format: "11:22:33:44:55:%02X", last), mtu: mtu)
            try await Self.sync(central)
            return central
        }

        static func sync(_ central: SimulatedCentral) async throws {
            _ = try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01")
        }

        /// Subscribes `central` (indications for `AB01`, notifications for `AB02`) and waits for the
        /// delegate. A read first makes it the most recently active central, so the subscription is
        /// attributed to it (and its MTU known); `reading` false leaves that out.
        func subscribe(
            _ central: SimulatedCentral, to uuid: String = "AB01", indications: Bool? = nil, reading: Bool = true
        ) async throws -> AsyncStream<[UInt8]>.AsyncIterator {
            if reading { try await Self.sync(central) }
            let before = delegate.subscriptions.withLock { $0 }
            let values = try await central.subscribe(
                serviceUUID: "ABCD", characteristicUUID: uuid, indications: indications)
            try await waitUntil("subscribed") { delegate.subscriptions.withLock { $0 } == before + 1 }
            return values.makeAsyncIterator()
        }

        func update(_ value: [UInt8], _ characteristic: MutableCharacteristic? = nil, to centrals: [Central]? = nil)
            -> Bool
        {
            manager.updateValue(Data(value), for: characteristic ?? indicating, onSubscribedCentrals: centrals)
        }

        var ready: Int { delegate.ready.withLock { $0 } }
    }

    @Test func theNextIndicationWaitsForTheConfirmation() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        #expect(rig.update([1]))
        #expect(!rig.update([2]), "sent while the confirmation is outstanding")
        #expect(await values.next() == [1])
        #expect(central.heldConfirmations == 1)
        #expect(!rig.update([3]))
        #expect(rig.ready == 0)
        central.confirmHeldIndications()
        try await waitUntil("ready after the confirmation") { rig.ready == 1 }
        #expect(rig.update([4]))
        #expect(await values.next() == [4], "refused values were never sent")
        // A central that confirms by itself paces the updates without holding them up.
        central.confirmHeldIndications()
        central.confirmsIndications = true
        try await Rig.sync(central)  // the confirmation was handled before the read
        #expect(rig.update([5]))
        #expect(await values.next() == [5])
        await rig.delegate.drain()
        #expect(rig.ready == 1, "no ready without a refusal")
    }

    @Test func twoCentralsMustBothConfirm() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let first = try await rig.central(1)
        let second = try await rig.central(2)
        first.confirmsIndications = false
        second.confirmsIndications = false
        var firstValues = try await rig.subscribe(first)
        var secondValues = try await rig.subscribe(second)
        #expect(rig.update([1]))
        #expect(await firstValues.next() == [1])
        #expect(await secondValues.next() == [1])
        #expect(!rig.update([2]))
        first.confirmHeldIndications()
        try await Rig.sync(first)  // the confirmation was handled before the read
        #expect(!rig.update([2]), "one confirmation of two")
        #expect(rig.ready == 0)
        second.confirmHeldIndications()
        try await waitUntil("ready after both") { rig.ready == 1 }
        #expect(rig.update([2]))
        #expect(await firstValues.next() == [2])
    }

    @Test func aCentralThatUnsubscribesIsNotWaitedFor() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        #expect(rig.update([1]))
        #expect(await values.next() == [1])
        #expect(!rig.update([2]))
        try await central.unsubscribe(serviceUUID: "ABCD", characteristicUUID: "AB01")
        try await waitUntil("ready after the unsubscription") { rig.ready == 1 }
        #expect(rig.update([3]))
    }

    @Test func aCentralThatDisconnectsIsNotWaitedFor() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let leaving = try await rig.central(1)
        let staying = try await rig.central(2)
        leaving.confirmsIndications = false
        var leavingValues = try await rig.subscribe(leaving)
        var stayingValues = try await rig.subscribe(staying)
        #expect(rig.update([1]))
        #expect(await leavingValues.next() == [1])
        #expect(await stayingValues.next() == [1])
        try await Rig.sync(staying)  // its confirmation was handled
        #expect(!rig.update([2]), "still waiting for the central that holds its confirmation")
        await leaving.disconnect()
        try await waitUntil("ready after the link dropped") { rig.ready == 1 }
        #expect(rig.update([3]))
        #expect(await stayingValues.next() == [3])
    }

    @Test func aLostConfirmationStopsWaitingAfterTheTimeout() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        // Long enough that the refusal below comes before it on a loaded machine, short for a test.
        // Scaled: under ThreadSanitizer beside the whole tier, 1.5 s passed between the first update
        // and the second (the refusal then found the wait already over).
        rig.manager.engine.sync { $0.confirmationTimeout = TestTime.scaled(.seconds(2)) }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        #expect(rig.update([1]))
        #expect(await values.next() == [1])
        #expect(!rig.update([2]))
        try await waitUntil("ready after the timeout") { rig.ready == 1 }
        #expect(rig.update([3]))
        // Right after the update (its own timer cannot have fired yet): the old wait's is gone.
        #expect(rig.manager.engine.sync { $0.confirmationTimers.count } == 1, "only the new wait's timer")
        #expect(await values.next() == [3])
    }

    @Test func characteristicsThatNotifyAreNotPaced() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central, to: "AB02", indications: true)
        #expect(rig.update([1], rig.notifying))
        #expect(rig.update([2], rig.notifying))
        #expect(await values.next() == [1])
        #expect(await values.next() == [2])
        #expect(central.heldConfirmations == 2)
        central.confirmHeldIndications()
        try await Rig.sync(central)
        await rig.delegate.drain()
        #expect(rig.ready == 0)
    }

    @Test func confirmFromAnotherProcessIsRefused() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        #expect(rig.update([1]))
        #expect(await values.next() == [1])
        let application = try #require(rig.bluez.adapters.first?.registeredApplications.first)
        let path = try ObjectPath(try #require(application.services.first?.characteristics.first?.path))
        let intruder = try await DBusConnection.open(address: rig.bluez.busAddress)
        defer { intruder.close() }
        do {
            _ = try await intruder.call(
                destination: try BusName(application.owner), path: path, interface: "org.bluez.GattCharacteristic1",
                member: "Confirm")
            Issue.record("Confirm from another process was answered")
        } catch {
            #expect(error.code == .accessDenied, "\(error)")
        }
        #expect(!rig.update([2]), "the intruder's Confirm did not count")
        central.confirmHeldIndications()
        try await waitUntil("ready") { rig.ready == 1 }
    }

    @Test func aValueTooLongForACentralIsRefusedNotCut() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        // A central whose MTU was never reported is not held to the guess of 20.
        let unknown = try rig.bluez.addCentral(address: "11:22:33:44:55:03", mtu: 247)
        var unknownValues = try await rig.subscribe(unknown, to: "AB02", reading: false)
        #expect(rig.notifying.subscribedCentrals?.first?.maximumUpdateValueLength == 20)
        #expect(rig.update(Array(repeating: 5, count: 100), rig.notifying))
        #expect(await unknownValues.next() == Array(repeating: 5, count: 100))
        try await unknown.unsubscribe(serviceUUID: "ABCD", characteristicUUID: "AB02")
        try await waitUntil("unsubscribed") { rig.delegate.subscriptions.withLock { $0 } == 0 }

        let small = try await rig.central(1, mtu: 23)
        let large = try await rig.central(2, mtu: 100)
        var smallValues = try await rig.subscribe(small, to: "AB02")
        _ = try await rig.subscribe(large, to: "AB02")
        let centrals = try #require(rig.notifying.subscribedCentrals)
        let largeCentral = try #require(centrals.first { $0.maximumUpdateValueLength == 97 })
        #expect(!rig.update(Array(repeating: 1, count: 21), rig.notifying))
        #expect(!rig.update(Array(repeating: 2, count: 98), rig.notifying, to: [largeCentral]))
        // Only the centrals listed count: 50 bytes fit the large one's MTU.
        #expect(rig.update(Array(repeating: 3, count: 50), rig.notifying, to: [largeCentral]))
        #expect(await smallValues.next() == Array(repeating: 3, count: 50), "the refused values were not sent")
        #expect(rig.update(Array(repeating: 4, count: 20), rig.notifying))
        #expect(await smallValues.next() == Array(repeating: 4, count: 20))
        await rig.delegate.drain()
        #expect(rig.ready == 0, "a refusal for length is not back-pressure")
        #expect(rig.manager.engine.sync { $0.roomTimer == nil })
    }

    @Test func moreThan512BytesAreAlwaysRefused() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1, mtu: 517)
        var values = try await rig.subscribe(central, to: "AB02")
        #expect(!rig.update(Array(repeating: 1, count: 513), rig.notifying))
        #expect(rig.update(Array(repeating: 2, count: 512), rig.notifying))
        #expect(await values.next() == Array(repeating: 2, count: 512))
        // Nobody subscribed to AB01, and still: no attribute value is longer than 512 bytes.
        #expect(!rig.update(Array(repeating: 3, count: 513)))
        await rig.delegate.drain()
        #expect(rig.ready == 0)
    }

    /// The table alone: a central that leaves is not waited for, whatever bluetoothd says after.
    @Test func theTableForgetsCentralsThatLeave() throws {
        var table = CentralSubscriptions()
        let characteristic = ObjectIdentifier(Recorder.self)
        table.connected("A")
        table.connected("B")
        _ = table.subscribe(characteristic)
        _ = table.subscribe(characteristic)
        let first = table.expectConfirmations(of: characteristic)
        let generation = try #require(first)
        var refused = table.refusesUpdate(of: characteristic)
        #expect(refused)
        _ = table.disconnected("B")
        var ended = table.takeEndedWaits()
        #expect(ended.isEmpty, "A has not confirmed")
        var counted = table.confirmationArrived(for: characteristic)
        #expect(counted)
        ended = table.takeEndedWaits()
        #expect(ended.map(\.refused) == [true])
        refused = table.refusesUpdate(of: characteristic)
        #expect(refused, "until the delegate heard ready")
        table.readyDelivered(for: characteristic, generation: generation)
        refused = table.refusesUpdate(of: characteristic)
        #expect(!refused)
        counted = table.confirmationArrived(for: characteristic)
        #expect(!counted, "a late confirmation is ignored")
        // A wait that refused nothing ends without a ready; a timeout of an old generation does nothing.
        let second = table.expectConfirmations(of: characteristic)
        let next = try #require(second)
        table.confirmationsTimedOut(for: characteristic, generation: generation)
        ended = table.takeEndedWaits()
        #expect(ended.isEmpty)
        table.confirmationsTimedOut(for: characteristic, generation: next)
        ended = table.takeEndedWaits()
        #expect(ended.map(\.refused) == [false])
        refused = table.refusesUpdate(of: characteristic)
        #expect(!refused)
    }
}
