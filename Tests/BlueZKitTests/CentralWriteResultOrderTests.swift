import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Results of writes with response reach their own callers, and the delegate in the order of the
/// writes, also when a failure (ATT 0x0E, which may stand for a failed pairing) is reported only
/// after a round trip to bluetoothd while a later write's result is already in.
@Suite(.timeLimit(.minutes(1))) struct CentralWriteResultOrderTests {
    /// A peripheral whose characteristic answers a write of 0xEE with Unlikely Error (0x0E).
    final class Device: Sendable {
        let arrived = PosixMutex<[[UInt8]]>([])
        let control: SimulatedCharacteristic
        let peripheral: SimulatedPeripheral
        /// bluetoothd's object of the peripheral (the round trip reads a property of it).
        let devicePath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_0E"

        init() {
            let arrived = self.arrived
            control = SimulatedCharacteristic(
                uuid: "5B00", flags: ["read", "write"],
                onWrite: { request throws(SimulatedATTError) in
                    arrived.withLock { $0.append(request.value) }
                    if request.value == [0xEE] { throw .unlikelyError }
                })
            peripheral = SimulatedPeripheral(
                address: "C0:FF:EE:00:00:0E", name: "Flaky", serviceUUIDs: ["5B00"],
                services: [SimulatedService(uuid: "5B00", characteristics: [control])])
        }

        func hasArrived(_ value: [UInt8]) -> Bool { arrived.withLock { $0.contains(value) } }
    }

    /// Records `didWriteValueFor`, in order: "ok" or the ATT error's code ("ATT 14").
    final class Writes: PeripheralDelegate, @unchecked Sendable {
        let results = PosixMutex<[String]>([])
        func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?)
        {
            let result = error.map { ($0 as? ATTError).map { "ATT \($0.code.rawValue)" } ?? "\($0)" } ?? "ok"
            results.withLock { $0.append(result) }
        }
    }

    static func connected(_ bluez: SimulatedBlueZ, _ device: Device) async throws -> (
        CentralManager, Peripheral, Characteristic
    ) {
        let (central, _, peripheral, service) = try await CentralAsyncTests.connected(
            bluez, device.peripheral, service: BluetoothUUID(0x5B00))
        let control = try #require(try await peripheral.discoverCharacteristics(matching: nil, in: service).first)
        return (central, peripheral, control)
    }

    @Test func aFailureReportedAfterARoundTripReachesItsOwnWrite() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, peripheral, control) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        // The round trip that checks what an Unlikely Error stands for is held back.
        bluez.inject(.delay(TestTime.scaled(.milliseconds(500))), for: .getProperty, path: device.devicePath)
        let refused = Task { try await peripheral.writeValue(Data([0xEE]), to: control) }
        try await waitUntil("the refused write reached the peripheral") { device.hasArrived([0xEE]) }
        let accepted = Task { try await peripheral.writeValue(Data([0x01]), to: control) }
        try await accepted.value
        let error = await #expect(throws: ATTError.self) { try await refused.value }
        #expect(error?.code == .unlikelyError)
    }

    @Test func theDelegateHearsTheResultsInTheOrderOfTheWrites() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, peripheral, control) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        let writes = Writes()
        peripheral.delegate = writes
        bluez.inject(.delay(TestTime.scaled(.milliseconds(500))), for: .getProperty, path: device.devicePath)
        peripheral.writeValue(Data([0xEE]), for: control, type: .withResponse)
        try await waitUntil("the refused write reached the peripheral") { device.hasArrived([0xEE]) }
        peripheral.writeValue(Data([0x01]), for: control, type: .withResponse)
        try await waitUntil("both answered") { writes.results.withLock { $0.count } == 2 }
        #expect(writes.results.withLock { $0 } == ["ATT 14", "ok"])
    }
}
