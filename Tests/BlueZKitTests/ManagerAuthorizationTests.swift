import BlueZKit
import BlueZKitTesting
import Locking
import TestSupport
import Testing

/// `authorization` as Apple's sample reads it in `centralManagerDidUpdateState`: denied while
/// the bus refuses us, allowed once bluetoothd's objects could be read.
@Suite(.timeLimit(.minutes(2))) struct ManagerAuthorizationTests {
    final class Checker: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.authorization")
        let seen = PosixMutex<[String]>([])
        func centralManagerDidUpdateState(_ central: CBCentralManager) {
            let text = "\(central.state) \(central.authorization) \(CBManager.authorization)"
            seen.withLock { $0.append(text) }
        }
    }

    @Test func theRawValuesAreCoreBluetooths() {
        #expect(CBManagerAuthorization.allCases.map(\.rawValue) == [0, 1, 2, 3])
        #expect(CBManagerAuthorization(rawValue: 3) == .allowedAlways)
    }

    @Test func aManagerTheBusRefusesIsDeniedThenAllowed() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        bluez.inject(ManagerStartupTests.accessDenied, for: ManagerStartupTests.getManagedObjects, count: 2)
        let checker = Checker()
        let central = CBCentralManager(
            delegate: checker, queue: checker.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on once allowed") { central.state == .poweredOn }
        try await waitUntil("the delegate heard it") { checker.seen.withLock { $0.count } == 2 }
        // The class property is the process's last word, which other tests' managers may change.
        let seen = checker.seen.withLock { $0 }.map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
        #expect(seen == ["unauthorized denied", "poweredOn allowedAlways"])
        #expect(central.authorization == .allowedAlways)
        #expect(CBManager.authorization != .notDetermined)
    }

    @Test func aPeripheralManagerIsAllowedOncePoweredOn() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let manager = PeripheralManager(
            delegate: nil, queue: DispatchQueue(label: "test.authorization.peripheral"),
            options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        #expect(manager.authorization == .allowedAlways)
    }
}
