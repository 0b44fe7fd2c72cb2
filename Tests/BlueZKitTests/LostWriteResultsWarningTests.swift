import BlueZKitTesting
import Dispatch
import TestSupport
import Testing

@testable import BlueZKit

/// bluetoothd acknowledges every write to a characteristic with both `.write` and
/// `.writeWithoutResponse` before the app answers: the manager warns once when it publishes one.
@Suite(.timeLimit(.minutes(5))) struct LostWriteResultsWarningTests {
    final class Quiet: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.lost-write-results")
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    }

    @Test func warnsOnceForAWritableCharacteristicWithBothKindsOfWrite() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let delegate = Quiet()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        defer { withExtendedLifetime((bluez, manager)) {} }
        func characteristic(_ properties: CharacteristicProperties, _ permissions: AttributePermissions)
            -> MutableCharacteristic
        {
            MutableCharacteristic(
                type: BluetoothUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"), properties: properties,
                value: nil, permissions: permissions)
        }
        let engine = manager.engine
        // One kind of write only, or not writable: nothing is lost.
        #expect(engine.lostWriteResultsWarning(for: characteristic([.write], [.writeable])) == nil)
        #expect(engine.lostWriteResultsWarning(for: characteristic([.writeWithoutResponse], [.writeable])) == nil)
        let readOnly = characteristic([.write, .writeWithoutResponse], [.readable])
        #expect(engine.lostWriteResultsWarning(for: readOnly) == nil)
        // Both, writable: once.
        let both = characteristic([.write, .writeWithoutResponse], [.writeable])
        let warning = try #require(engine.lostWriteResultsWarning(for: both))
        #expect(warning.contains("6E400002-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(warning.contains("respond(to:withResult:)"))
        #expect(engine.lostWriteResultsWarning(for: both) == nil)
    }
}
