import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// The rest of the central's async API: included services, descriptors, disconnecting, and
/// writes without response that wait for room, on the simulated BlueZ.
@Suite(.timeLimit(.minutes(5))) struct CentralAsyncCompletionTests {
    /// A peripheral whose service 5B00 includes 5B10; 5B01 has a descriptor and is written with
    /// response; 5B02 is written without response and holds every write while `held` is set.
    final class Device: Sendable {
        let held = PosixMutex(false)
        let release = DispatchSemaphore(value: 0)
        let arrived = PosixMutex<[[UInt8]]>([])
        let peripheral: SimulatedPeripheral

        init() {
            let held = self.held
            let release = self.release
            let arrived = self.arrived
            let setting = SimulatedDescriptor(uuid: "5B03", flags: ["read"], value: [0x01])
            let control = SimulatedCharacteristic(uuid: "5B01", flags: ["read", "write"], descriptors: [setting])
            let stream = SimulatedCharacteristic(
                uuid: "5B02", flags: ["write-without-response"],
                onWrite: { request throws(SimulatedATTError) in
                    arrived.withLock { $0.append(request.value) }
                    if held.withLock({ $0 }) { _ = release.wait(timeout: .now() + 20) }
                })
            let included = SimulatedService(uuid: "5B10", isPrimary: false)
            peripheral = SimulatedPeripheral(
                address: "C0:FF:EE:00:00:5B", name: "Complete", serviceUUIDs: ["5B00"],
                services: [
                    SimulatedService(uuid: "5B00", characteristics: [control, stream], includes: [included]),
                    included,
                ])
        }
    }

    static func connected(_ bluez: SimulatedBlueZ, _ device: Device) async throws -> (
        CentralManager, CentralAsyncTests.Quiet, Peripheral, Service
    ) {
        try await CentralAsyncTests.connected(bluez, device.peripheral, service: BluetoothUUID(0x5B00))
    }

    @Test(.timeLimit(.minutes(1))) func includedServicesAndDescriptors() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (central, _, peripheral, service) = try await Self.connected(bluez, Device())
        defer { withExtendedLifetime(central) {} }
        let included = try await peripheral.discoverIncludedServices(matching: nil, in: service)
        #expect(included.map(\.uuid) == [BluetoothUUID(0x5B10)])
        #expect(service.includedServices?.map(\.uuid) == [BluetoothUUID(0x5B10)])
        let control = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x5B01)], in: service).first)
        let descriptors = try await peripheral.discoverDescriptors(of: control)
        #expect(descriptors.map(\.uuid).contains(BluetoothUUID(0x5B03)))
        let setting = try #require(descriptors.first { $0.uuid == BluetoothUUID(0x5B03) })
        #expect(try await peripheral.readValue(of: setting) == Data([0x01]))
    }

    @Test(.timeLimit(.minutes(1))) func disconnectReturnsOnceTheLinkIsDown() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (central, _, peripheral, _) = try await Self.connected(bluez, Device())
        try await central.disconnect(from: peripheral)
        #expect(peripheral.state == .disconnected)
        // Not connected: returns at once, and the next operation fails as not connected.
        try await central.disconnect(from: peripheral)
        await #expect(throws: BluetoothError.self) {
            _ = try await peripheral.discoverServices(matching: nil)
        }
    }

    /// bluetoothd refuses `AcquireWrite`, so writes go as `WriteValue` commands, at most 16 in
    /// flight; the peripheral holds them: the 16th call waits until the peripheral answers.
    @Test(.timeLimit(.minutes(1))) func writesWithoutResponseWaitForRoomAndAllArriveInOrder() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, _, peripheral, service) = try await Self.connected(bluez, device)
        defer { withExtendedLifetime(central) {} }
        let stream = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x5B02)], in: service).first)
        bluez.inject(
            .error(name: "org.bluez.Error.NotSupported", message: "Operation is not supported"),
            for: SimulatedMethod(interface: "org.bluez.GattCharacteristic1", member: "AcquireWrite"))
        device.held.withLock { $0 = true }
        let returned = PosixMutex(0)
        let expected = (0..<40).map { [UInt8($0)] }
        let writer = Task {
            for bytes in expected {
                try await peripheral.writeValueWithoutResponse(Data(bytes), to: stream)
                returned.withLock { $0 += 1 }
            }
        }
        try await waitUntil("the first write is held") { !device.arrived.withLock { $0.isEmpty } }
        try await waitUntil("15 calls returned") { returned.withLock { $0 } >= 15 }
        // Round trips through the manager's queue: a call that did not wait would have returned by now.
        for _ in 0..<5 { central.queue.sync {} }
        await Task.yield()
        #expect(returned.withLock { $0 } == 15)
        #expect(!peripheral.canSendWriteWithoutResponse)
        device.held.withLock { $0 = false }
        device.release.signal()
        try await writer.value
        try await waitUntil("40 writes") { device.arrived.withLock { $0.count } == 40 }
        #expect(device.arrived.withLock { $0 } == expected)
    }

    @Test(.timeLimit(.minutes(1))) func aWriteWithoutResponseToADisconnectedPeripheralThrows() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let device = Device()
        let (central, _, peripheral, service) = try await Self.connected(bluez, device)
        let stream = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x5B02)], in: service).first)
        try await central.disconnect(from: peripheral)
        await #expect(throws: BluetoothError.self) {
            try await peripheral.writeValueWithoutResponse(Data([1]), to: stream)
        }
        #expect(device.arrived.withLock { $0.isEmpty })
    }
}
