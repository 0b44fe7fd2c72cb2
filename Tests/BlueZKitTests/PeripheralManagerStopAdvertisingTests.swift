import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// `stopAdvertising()` called while `startAdvertising` is still registering its advertisement
/// wins: bluetoothd ends up holding none, `isAdvertising` is false, and nothing is saved for
/// restoration.
@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerStopAdvertisingTests {
    typealias Restoration = PeripheralRestorationTests

    @Test func aStopWhileTheStartRegistersLeavesNothingAdvertisedOrSaved() async throws {
        let rig = try await Restoration.Rig.start("stopped-while-starting")
        defer { rig.tearDown() }
        let adapter = try #require(rig.bluez.adapters.first)
        let released = Restoration.WeakManager()
        do {
            let first = Restoration.Publisher()
            let manager = try await Restoration.publish(first, options: rig.options)
            released.value = manager
            // bluetoothd holds RegisterAdvertisement's reply back: the stop lands while it registers.
            rig.bluez.inject(
                .delay(TestTime.scaled(.milliseconds(300))), for: PeripheralManagerCleanupTests.registerAdvertisement)
            manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Early"])
            try await waitUntil("RegisterAdvertisement reached bluetoothd") { rig.bluez.unfiredFaultCount == 0 }
            manager.stopAdvertising()
            try await waitUntil("the start was answered") { first.events.contains("advertising") }
            #expect(!manager.isAdvertising)
            #expect(adapter.registeredAdvertisements.isEmpty)
        }
        try await waitUntil("the manager is released") { released.value == nil }

        // The relaunched process restores the services, and no advertisement.
        let second = Restoration.Publisher()
        let manager = PeripheralManager(delegate: second, queue: second.queue, options: rig.options)
        try await waitUntil("restored and powered on") { second.events.count >= 2 }
        #expect(Array(second.events.prefix(2)) == ["restore", "state poweredOn"])
        #expect(second.restoredName.withLock { $0 } == nil)
        try await waitUntil("published again") { adapter.registeredApplications.count == 1 }
        #expect(!manager.isAdvertising)
    }
}
