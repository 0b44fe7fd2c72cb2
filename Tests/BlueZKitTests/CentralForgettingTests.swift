import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// What bluetoothd forgets, the central forgets: a scan in a busy place (private addresses rotate)
/// must not keep a ``Peripheral`` per address for ever. One the app holds is the one reported
/// when the device comes back.
@Suite(.timeLimit(.minutes(5))) struct CentralForgettingTests {
    /// Records discoveries by identifier only, so that the test alone decides what it holds.
    final class Discoveries: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.forgetting")
        /// The identifiers discovered, each once, in the order of their first discovery.
        let seen = PosixMutex<[UUID]>([])
        let held = PosixMutex<[Peripheral]>([])
        let keeps: Bool
        init(keeps: Bool) { self.keeps = keeps }
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi RSSI: Int
        ) {
            // Distinct, in order: the scan allows duplicates, and a slow run (ThreadSanitizer)
            // sees a device reported again before the test looks.
            seen.withLock { if !$0.contains(peripheral.identifier) { $0.append(peripheral.identifier) } }
            if keeps { held.withLock { $0.append(peripheral) } }
        }
    }

    final class WeakBox: @unchecked Sendable {
        weak var peripheral: Peripheral?
    }

    static func scanning(keeps: Bool) async throws -> (SimulatedBlueZ, CentralManager, Discoveries) {
        let bluez = try await SimulatedBlueZ.start()
        let delegate = Discoveries(keeps: keeps)
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await pollUntil(
            "powered on", timeout: .seconds(10), diagnostics: { "state \(central.state)" },
            { central.state == .poweredOn })
        central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        try await waitUntil("scanning") { central.isScanning }
        return (bluez, central, delegate)
    }

    @Test func aPeripheralBluetoothdForgetsIsReleasedWhenTheAppDoesNotHoldIt() async throws {
        let (bluez, central, delegate) = try await Self.scanning(keeps: false)
        defer { withExtendedLifetime((bluez, central)) {} }
        var boxes: [WeakBox] = []
        for n in 0..<20 {
            let device = SimulatedPeripheral(address: String(format: "C0:FF:EE:00:01:%02X", n), name: "Tag \(n)")
            try bluez.addPeripheral(device)
            try await waitUntil("discovered \(n)") { delegate.seen.withLock { $0.count } == n + 1 }
            let identifier = try #require(delegate.seen.withLock { $0.last })
            let box = WeakBox()
            box.peripheral = central.retrievePeripherals(withIdentifiers: [identifier]).first
            #expect(box.peripheral != nil)
            boxes.append(box)
            #expect(bluez.removeDevice(device))
        }
        try await waitUntil("every forgotten peripheral released") { boxes.allSatisfy { $0.peripheral == nil } }
        #expect(central.retrievePeripherals(withIdentifiers: delegate.seen.withLock { $0 }).isEmpty)
    }

    /// The table of forgotten peripherals is pruned in passes: never more than twice what the
    /// app holds (or 64 entries), and what the app holds stays in it.
    @Test func theForgottenTableStaysWithinTwiceWhatTheAppHolds() async throws {
        let (bluez, central, delegate) = try await Self.scanning(keeps: false)
        defer { withExtendedLifetime((bluez, central)) {} }
        let engine = try #require(central.shared.withLock { $0.engine })
        var held: [Peripheral] = []
        var largest = 0
        for n in 0..<150 {
            let device = SimulatedPeripheral(address: String(format: "C0:FF:EE:00:03:%02X", n), name: nil)
            try bluez.addPeripheral(device)
            try await waitUntil("discovered \(n)") { delegate.seen.withLock { $0.count } == n + 1 }
            if n.isMultiple(of: 5) {
                let identifier = try #require(delegate.seen.withLock { $0.last })
                held.append(try #require(central.retrievePeripherals(withIdentifiers: [identifier]).first))
            }
            #expect(bluez.removeDevice(device))
            try await waitUntil("forgotten \(n)") { engine.busQueue.sync { engine.peripherals.isEmpty } }
            largest = max(largest, engine.busQueue.sync { engine.forgotten.count })
        }
        #expect(largest <= max(CentralEngine.forgottenPruneMinimum, 2 * held.count) + 1)
        let kept = engine.busQueue.sync { engine.forgotten.values.compactMap(\.peripheral) }
        #expect(Set(kept.map(\.identifier)) == Set(held.map(\.identifier)))
    }

    @Test func aPeripheralTheAppHoldsIsTheOneReportedWhenTheDeviceComesBack() async throws {
        let (bluez, central, delegate) = try await Self.scanning(keeps: true)
        defer { withExtendedLifetime((bluez, central)) {} }
        let device = SimulatedPeripheral(address: "C0:FF:EE:00:02:01", name: "Kept")
        try bluez.addPeripheral(device)
        try await waitUntil("discovered") { !delegate.held.withLock { $0 }.isEmpty }
        let first = try #require(delegate.held.withLock { $0.first })
        #expect(bluez.removeDevice(device))
        try await waitUntil("gone from bluetoothd") {
            central.retrievePeripherals(withIdentifiers: [first.identifier]).isEmpty
        }
        // The scan allows duplicates: reports of the first advertisement may still be on the
        // delegate's queue. Drain it, then count what the device's return adds.
        delegate.queue.sync {}
        let before = delegate.held.withLock { $0.count }
        device.advertise()
        try await waitUntil("discovered again") { delegate.held.withLock { $0.count } > before }
        #expect(delegate.held.withLock { $0[before] } === first)
        #expect(central.retrievePeripherals(withIdentifiers: [first.identifier]).first === first)
    }
}
