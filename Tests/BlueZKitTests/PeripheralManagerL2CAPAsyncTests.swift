import BlueZKit
import BlueZKitTesting
import Dispatch
import Locking
import TestSupport
import Testing

/// The peripheral manager's async L2CAP calls and its stream of opened channels, where no kernel
/// Bluetooth is needed: the errors the delegate gets are thrown, after the delegate heard them.
/// Channels that really open are in the end-to-end tier (`L2CAPEndToEndTests`).
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerL2CAPAsyncTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral.l2cap.async")
        private let log = PosixMutex<[String]>([])
        var events: [String] { log.withLock { $0 } }
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(
            _ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?
        ) {
            let code = (error as? BluetoothError).map { "\($0.code)" } ?? "\(error as Any)"
            log.withLock { $0.append(error == nil ? "published" : "publish failed: \(code)") }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, didUnpublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?
        ) {
            log.withLock { $0.append(error == nil ? "unpublished \(PSM)" : "unpublish failed \(PSM)") }
        }
    }

    @Test(.timeLimit(.minutes(1))) func publishingBeforePoweredOnThrowsWhatTheDelegateGets() async throws {
        let recorder = Recorder()
        // No bus at this address: the manager stays away from poweredOn.
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue,
            options: PeripheralManagerOptions(busAddress: "unix:path=/nonexistent/bluezkit-test-bus"))
        let error = await #expect(throws: BluetoothError.self) {
            _ = try await manager.publishL2CAPChannel(requiringEncryption: false)
        }
        #expect(error?.code == .bluetoothUnavailable)
        #expect(recorder.events == ["publish failed: bluetoothUnavailable"])
        #expect(manager.publishedL2CAPChannels.isEmpty)
    }

    @Test(.timeLimit(.minutes(1))) func aFailedPublishPublishesNothingAndUnpublishingAnUnknownPSMThrows() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        // The simulated adapter's address is no kernel controller's: the kernel refuses (or has
        // no Bluetooth sockets at all, as on this test's machines). Either way: thrown, not published.
        do {
            let psm = try await manager.publishL2CAPChannel(requiringEncryption: false)
            Issue.record("published PSM \(psm) on a simulated adapter")
        } catch let error as BluetoothError {
            #expect(recorder.events.count == 1)
            #expect(recorder.events.first?.hasPrefix("publish failed") == true)
            #expect(error.code != .bluetoothUnavailable)
        }
        #expect(manager.publishedL2CAPChannels.isEmpty)

        let unknown = await #expect(throws: BluetoothError.self) { try await manager.unpublishL2CAPChannel(psm: 0x85) }
        #expect(unknown?.code == .invalidParameters)
        #expect(recorder.events.last == "unpublish failed 133")
    }

    @Test(.timeLimit(.minutes(1))) func theChannelStreamEndsWhenTheManagerIsReleased() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        var manager: PeripheralManager? = PeripheralManager(
            delegate: nil, queue: nil, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        let channels = try #require(manager).l2capChannels()
        let consumer = Task {
            var count = 0
            for await _ in channels { count += 1 }
            return count
        }
        try await waitUntil("powered on") { manager?.state == .poweredOn }
        manager = nil
        #expect(await consumer.value == 0)
    }
}
