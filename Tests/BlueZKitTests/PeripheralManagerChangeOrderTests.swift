import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

/// `add(_:)` and `remove(_:)` take effect in the order the app calls them, however long a
/// registration takes (interleaving seed 9022, profile notifySockets).
@Suite(.timeLimit(.minutes(2))) struct PeripheralManagerChangeOrderTests {
    typealias Fixture = PeripheralManagerRepublishRetryTests

    /// remove, add, add, remove while the first add's `RegisterApplication` is answered late:
    /// the last call is a remove, so bluetoothd must end up without the service. Before, `remove`
    /// changed the services at once while `add` waited its turn behind the slow registration, so
    /// the second remove found nothing to remove and the adds then published the service.
    @Test func aRemoveAfterAnAddStillWaitingForItsTurnWins() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Fixture.Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        defer { withExtendedLifetime(manager) {} }
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = Fixture.service()
        manager.add(service)
        try await waitUntil("published") { Fixture.holds(bluez) }

        bluez.inject(.delay(.milliseconds(300)), for: Fixture.registerApplication)
        manager.remove(service)
        manager.add(service)
        manager.add(service)
        manager.remove(service)
        try await waitUntil("every add answered") { recorder.events.count == 3 }
        try await waitUntil("the delayed registration fired") { bluez.unfiredFaultCount == 0 }
        // What the manager's chain of changes does after the last call, a reconcile, has no
        // signal of its own: an add after it, answered, shows that everything before it is done.
        let probe = MutableService(type: BluetoothUUID(0xABCE), primary: true)
        manager.add(probe)
        try await waitUntil("the probe added") { recorder.events.count == 4 }
        #expect(!Fixture.holds(bluez), "the last call removed the service: \(recorder.events)")
    }
}
