import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// The async counterparts of writes with response, descriptor reads and RSSI: each call gets its
/// own result, also beside the delegate-style calls and after a cancelled wait.
@Suite(.timeLimit(.minutes(5))) struct CentralAsyncWriteTests {
    /// A peripheral whose characteristic refuses values longer than two bytes, holds a write of
    /// 0x77 until `release` is signalled, and has a writable descriptor.
    final class Device: Sendable {
        let release = DispatchSemaphore(value: 0)
        /// The values the peripheral accepted or was handed, in order of arrival.
        let arrived = PosixMutex<[[UInt8]]>([])
        var accepted: [UInt8]? { arrived.withLock { $0.last { $0.count <= 2 && $0 != [0x77] } } }
        let control: SimulatedCharacteristic
        let setting = SimulatedDescriptor(uuid: "5A01", flags: ["read", "write"], value: [0x01])
        let peripheral: SimulatedPeripheral

        init() {
            let release = self.release
            let arrived = self.arrived
            control = SimulatedCharacteristic(
                uuid: "5A00", flags: ["read", "write"], descriptors: [setting],
                onWrite: { request throws(SimulatedATTError) in
                    arrived.withLock { $0.append(request.value) }
                    if request.value == [0x77] { _ = release.wait(timeout: .now() + 10) }
                    if request.value.count > 2 { throw .invalidAttributeValueLength }
                })
            peripheral = SimulatedPeripheral(
                address: "C0:FF:EE:00:00:05", name: "Writable", rssi: -47, serviceUUIDs: ["5A00"],
                services: [SimulatedService(uuid: "5A00", characteristics: [control])])
        }
    }

    static func connected(_ bluez: SimulatedBlueZ, _ device: Device) async throws -> (
        CentralManager, CentralAsyncTests.Quiet, Peripheral, Characteristic
    ) {
        let (central, delegate, peripheral, service) = try await CentralAsyncTests.connected(
            bluez, device.peripheral, service: BluetoothUUID(0x5A00))
        let control = try #require(try await peripheral.discoverCharacteristics(matching: nil, in: service).first)
        return (central, delegate, peripheral, control)
    }

    @Test func eachWriteGetsItsOwnResultBesideDelegateStyleWrites() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, _, peripheral, control) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        // A delegate-style write first: its result must not answer the async write after it.
        peripheral.writeValue(Data([0x01]), for: control, type: .withResponse)
        await #expect(throws: ATTError.self) { try await peripheral.writeValue(Data([2, 2, 2]), to: control) }
        try await peripheral.writeValue(Data([0x03]), to: control)
        #expect(device.accepted == [0x03])
        // Concurrent writes: each gets its own answer.
        let accepted = Task { try await peripheral.writeValue(Data([0x04]), to: control) }
        let refused = Task { try await peripheral.writeValue(Data([5, 5, 5]), to: control) }
        try await accepted.value
        await #expect(throws: ATTError.self) { try await refused.value }
    }

    @Test func aCancelledWaitKeepsItsPlaceAndTheNextWriteGetsItsOwnResult() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, _, peripheral, control) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        let held = Task { try await peripheral.writeValue(Data([0x77]), to: control) }
        try await waitUntil("the held write reached the peripheral") {
            device.arrived.withLock { $0.contains([0x77]) }
        }
        held.cancel()
        await #expect(throws: CancellationError.self) { try await held.value }
        // The next write is refused; the held one, released now, succeeds: each result goes
        // to its own write.
        let refused = Task { try await peripheral.writeValue(Data([9, 9, 9]), to: control) }
        device.release.signal()
        await #expect(throws: ATTError.self) { try await refused.value }
        try await peripheral.writeValue(Data([0x0A]), to: control)
        #expect(device.accepted == [0x0A])
    }

    @Test func descriptorsAndRSSI() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, _, peripheral, control) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        peripheral.discoverDescriptors(for: control)
        try await waitUntil("descriptors") {
            control.descriptors?.contains { $0.uuid == BluetoothUUID(0x5A01) } == true
        }
        let setting = try #require(control.descriptors?.first { $0.uuid == BluetoothUUID(0x5A01) })
        #expect(try await peripheral.readValue(of: setting) == Data([0x01]))
        try await peripheral.writeValue(Data([0x02]), to: setting)
        #expect(device.setting.value == [0x02])
        #expect(try await peripheral.readValue(of: setting) == Data([0x02]))
        #expect(try await peripheral.currentRSSI() == -47)
    }
}
