import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// `send(_:for:onSubscribedCentrals:)`, the async `updateValue`: where `updateValue` says "not
/// now", it waits for room and sends then; what `updateValue` refuses for good, it throws.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerSendTests {
    typealias Rig = PeripheralManagerIndicationTests.Rig

    @Test(.timeLimit(.minutes(1))) func aSendWaitsForTheConfirmationThenGoesOut() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        try await rig.manager.send(Data([1]), for: rig.indicating)
        #expect(await values.next() == [1])
        // The first indication is not confirmed: updateValue says "not now", send waits.
        #expect(!rig.update([9]))
        let sent = PosixMutex(false)
        let second = Task {
            try await rig.manager.send(Data([2]), for: rig.indicating)
            sent.withLock { $0 = true }
        }
        try await waitUntil("the send waits") { rig.manager.updateWaiters.count == 1 }
        await rig.delegate.drain()
        #expect(!sent.withLock { $0 }, "sent before the confirmation")
        // The central confirms the first: room again.
        central.confirmHeldIndications()
        try await second.value
        #expect(sent.withLock { $0 })
        #expect(await values.next() == [2])
        #expect(rig.delegate.ready.withLock { $0 } >= 1, "the delegate heard ready first")
    }

    @Test(.timeLimit(.minutes(1))) func whatUpdateValueRefusesForGoodIsThrown() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let tooLong = await #expect(throws: BluetoothError.self) {
            try await rig.manager.send(Data(count: 513), for: rig.indicating)
        }
        #expect(tooLong?.code == .invalidParameters)
        let unpublished = MutableCharacteristic(
            type: BluetoothUUID(0xAB09), properties: [.notify], value: nil, permissions: [.readable])
        let notPublished = await #expect(throws: BluetoothError.self) {
            try await rig.manager.send(Data([1]), for: unpublished)
        }
        #expect(notPublished?.code == .invalidParameters)
        #expect(notPublished?.message.contains("not in a published service") == true)
        // Longer than a subscribed central takes (MTU 23: 20 bytes): that reason, with the central.
        let small = try await rig.central(1, mtu: 23)
        _ = try await rig.subscribe(small, to: "AB02")
        let tooLongForTheCentral = await #expect(throws: BluetoothError.self) {
            try await rig.manager.send(Data(count: 21), for: rig.notifying)
        }
        #expect(tooLongForTheCentral?.code == .invalidParameters)
        #expect(tooLongForTheCentral?.message.contains("takes at most 20") == true)
        // …naming that central: the only subscriber of the characteristic.
        let subscriber = try #require(rig.notifying.subscribedCentrals?.first)
        #expect(tooLongForTheCentral?.message.contains("central \(subscriber.identifier.uuidString) ") == true)
    }

    @Test(.timeLimit(.minutes(1))) func cancellingAWaitingSendThrowsAndSendsNothing() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let central = try await rig.central(1)
        central.confirmsIndications = false
        var values = try await rig.subscribe(central)
        try await rig.manager.send(Data([1]), for: rig.indicating)
        #expect(await values.next() == [1])
        let waiting = Task { try await rig.manager.send(Data([2]), for: rig.indicating) }
        try await waitUntil("waiting") { rig.manager.updateWaiters.count == 1 }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(rig.manager.updateWaiters.count == 0)
    }
}
