import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// A link's state has one owner, the engine's `links`; the manager's list of linked peripherals
/// (saved for restoration) is a projection of it, written only where link events are applied.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CentralLinkProjectionTests {
    /// A connection cancelled and requested again at once stays saved: the `didDisconnect` of
    /// the cancelled request, applied after the new request was made, leaves the new one in the
    /// list (when the list was also written at the request, it dropped it, and a relaunched
    /// process restored nothing).
    @Test func aRequestMadeAgainRightAfterACancelIsRestored() async throws {
        let fixture = try await CentralRestorationTests.Fixture.make()
        defer { fixture.tearDown() }
        let released = CentralRestorationTests.WeakManager()
        var identifier: UUID?
        do {
            let first = CentralRestorationTests.Restorer()
            let central = fixture.manager(first)
            released.value = central
            try await waitUntil("powered on") { central.state == .poweredOn }
            let discoveries = central.discoveries()
            central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
            fixture.sensor.advertise()
            var iterator = discoveries.makeAsyncIterator()
            let lock = try #require(await iterator.next()?.peripheral)
            identifier = lock.identifier
            central.stopScan()
            fixture.sensor.setInRange(false)
            central.connect(lock)  // pending: the lock is away
            central.cancelPeripheralConnection(lock)
            central.connect(lock)
            #expect(lock.state == .connecting)
            // The engine has taken the three requests once a call that waits for its queue
            // returns, and the delegate queue has applied their events after one block on it.
            _ = central.retrievePeripherals(withIdentifiers: [])
            first.queue.sync {}
            #expect(lock.state == .connecting)
        }
        try await released.waitUntilGone()
        let second = CentralRestorationTests.Restorer()
        let central = fixture.manager(second)
        try await waitUntil("restored") { second.events.contains("state poweredOn") }
        #expect(second.restoredPeripherals.map(\.identifier) == [try #require(identifier)])
        _ = central
    }
}
