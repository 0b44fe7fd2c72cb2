import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Permissions are enforced without asking the app, and bluetoothd's `prepare-authorize`
/// question is answered without delivering the value twice.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerPermissionTests {
    static let service = "0000abce-0000-1000-8000-00805f9b34fb"

    static func published() async throws -> (
        SimulatedBlueZ, PeripheralManager, PeripheralManagerGATTTests.Server, SimulatedCentral
    ) {
        let bluez = try await SimulatedBlueZ.start()
        let server = PeripheralManagerGATTTests.Server()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        // Properties that promise what the permissions do not allow.
        let unreadable = MutableCharacteristic(
            type: BluetoothUUID(0xAC01), properties: [.read], value: nil, permissions: [.writeable])
        let unwritable = MutableCharacteristic(
            type: BluetoothUUID(0xAC02), properties: [.write], value: nil, permissions: [.readable])
        let writable = MutableCharacteristic(
            type: BluetoothUUID(0xAC03), properties: [.write], value: nil, permissions: [.writeable])
        // A static value the permissions do not let anyone read.
        let unreadableStatic = MutableCharacteristic(
            type: BluetoothUUID(0xAC04), properties: [.read], value: Data([0x5E, 0xC2]), permissions: [.writeable])
        let service = MutableService(type: BluetoothUUID(0xABCE), primary: true)
        service.characteristics = [unreadable, unwritable, writable, unreadableStatic]
        manager.add(service)
        try await waitUntil("added") { server.log.withLock { $0 } == ["added ABCE"] }
        let central = try bluez.addCentral(address: "11:22:33:44:55:77")
        return (bluez, manager, server, central)
    }

    @Test func aReadWithoutTheReadablePermissionIsRefusedWithoutAskingTheApp() async throws {
        let (bluez, manager, server, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        await #expect(throws: SimulatedATTError.readNotPermitted) {
            _ = try await central.read(serviceUUID: Self.service, characteristicUUID: "ac01")
        }
        #expect(server.reads.withLock { $0 } == 0)
    }

    @Test func aStaticValueWithoutTheReadablePermissionIsRefused() async throws {
        let (bluez, manager, server, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        await #expect(throws: SimulatedATTError.readNotPermitted) {
            _ = try await central.read(serviceUUID: Self.service, characteristicUUID: "ac04")
        }
        #expect(server.reads.withLock { $0 } == 0)
    }

    @Test func aWriteWithoutTheWriteablePermissionIsRefusedWithoutAskingTheApp() async throws {
        let (bluez, manager, server, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        await #expect(throws: SimulatedATTError.writeNotPermitted) {
            try await central.write(serviceUUID: Self.service, characteristicUUID: "ac02", value: [0x01])
        }
        // A permitted write still reaches the delegate (and proves the delegate queue is drained).
        try await central.write(serviceUUID: Self.service, characteristicUUID: "ac03", value: [0x01])
        #expect(server.log.withLock { $0 } == ["added ABCE", "write [1]"])
    }

    @Test func aPrepareAuthorizeQuestionIsAnsweredWithoutDeliveringTheValue() async throws {
        let (bluez, manager, server, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        try await central.write(
            serviceUUID: Self.service, characteristicUUID: "ac03", value: [0x07], prepareAuthorize: true)
        await #expect(throws: SimulatedATTError.writeNotPermitted) {
            try await central.write(
                serviceUUID: Self.service, characteristicUUID: "ac02", value: [0x07], prepareAuthorize: true)
        }
        // The executed write comes as an ordinary one; only it reaches the delegate.
        try await central.write(serviceUUID: Self.service, characteristicUUID: "ac03", value: [0x01])
        #expect(server.log.withLock { $0 } == ["added ABCE", "write [1]"])
    }
}
