import BlueZKit
import BlueZKitTesting
import Dispatch
import Locking
import TestSupport
import Testing

/// `add(_:)` then `remove(_:)` of a service leaves it unpublished, whenever the changes run.
@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerAddThenRemoveTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral.add-remove")
        private let log = PosixMutex<[String]>([])
        var added: [String] { log.withLock { $0 } }
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
            log.withLock { $0.append("\(service.uuid)") }
        }
    }

    /// A service removed while its add waits behind an earlier change (a registration bluetoothd
    /// answers late) is not published when the add's turn comes: the add took the service into
    /// the added services only then, after `remove(_:)` had found nothing to take out, and the
    /// service stayed published (seen by the interleaving tester, seed 2 advertising, under TSan).
    @Test func aServiceRemovedBeforeItsAddRanStaysUnpublished() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let first = MutableService(type: BluetoothUUID(0xFFE0), primary: true)
        let second = MutableService(type: BluetoothUUID(0xFFF0), primary: true)
        bluez.inject(
            .delay(.milliseconds(300)),
            for: SimulatedMethod(interface: "org.bluez.GattManager1", member: "RegisterApplication"))
        manager.add(first)
        manager.add(second)
        manager.remove(second)
        try await waitUntil("both adds answered") { recorder.added.count == 2 }
        let published = {
            (bluez.adapters.first?.registeredApplications ?? []).flatMap(\.serviceUUIDs).map {
                $0.lowercased().prefix(8)
            }
        }
        try await waitUntil("only the first service is published") { published() == ["0000ffe0"] }
    }
}
