import BlueZKit
import BlueZKitTesting
import DBus
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// A registration bluetoothd refuses leaves nothing exported, and `startAdvertising` is one at a time.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerCleanupTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral-cleanup")
        let added = PosixMutex<[String]>([])
        let advertising = PosixMutex<[String]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            added.withLock { $0.append(error == nil ? "added \(service.uuid)" : "failed \(service.uuid)") }
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
            let code = (error as? BluetoothError).map { "\($0.code)" } ?? (error == nil ? "ok" : "\(error!)")
            advertising.withLock { $0.append(code) }
        }
    }

    static let registerAdvertisement = SimulatedMethod(
        interface: "org.bluez.LEAdvertisingManager1", member: "RegisterAdvertisement")
    static let registerApplication = SimulatedMethod(
        interface: "org.bluez.GattManager1", member: "RegisterApplication")

    /// A manager with one published service (which names its bus connection).
    static func published(_ bluez: SimulatedBlueZ) async throws -> (PeripheralManager, Recorder, BusName) {
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = MutableService(type: BluetoothUUID(0xABC1), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xAB01), properties: [.read], value: Data([1]), permissions: [.readable])
        ]
        manager.add(service)
        try await waitUntil("published") { recorder.added.withLock { $0 } == ["added ABC1"] }
        let owner = try #require(bluez.adapters.first?.registeredApplications.first?.owner)
        return (manager, recorder, try BusName(owner))
    }

    /// The child nodes of `/org/bluezkit` in the manager's connection, as another process sees them.
    static func exportedNodes(of owner: BusName, on bluez: SimulatedBlueZ) async throws -> [String] {
        let other = try await DBusConnection.open(address: bluez.busAddress)
        defer { other.close() }
        let reply = try await other.call(
            destination: owner, path: try ObjectPath("/org/bluezkit"), interface: "org.freedesktop.DBus.Introspectable",
            member: "Introspect")
        let xml = try #require(reply.first?.stringValue)
        return xml.split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "<node name=\""), let end = line[start.upperBound...].firstIndex(of: "\"")
            else { return nil }
            return String(line[start.upperBound..<end])
        }
    }

    @Test func aRefusedAdvertisementIsNotLeftExported() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, recorder, owner) = try await Self.published(bluez)
        bluez.inject(.error(name: "org.bluez.Error.Failed", message: "Failed"), for: Self.registerAdvertisement)
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Refused"])
        try await waitUntil("refused") { recorder.advertising.withLock { $0 }.count == 1 }
        #expect(recorder.advertising.withLock { $0 } == ["unknown"])
        #expect(!manager.isAdvertising)
        let nodes = try await Self.exportedNodes(of: owner, on: bluez)
        #expect(nodes.contains { $0.hasPrefix("app") }, "\(nodes)")
        #expect(!nodes.contains { $0.hasPrefix("advertisement") }, "\(nodes)")
    }

    @Test func aRefusedApplicationIsNotLeftExported() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, recorder, owner) = try await Self.published(bluez)
        let before = try await Self.exportedNodes(of: owner, on: bluez)
        bluez.inject(.error(name: "org.bluez.Error.Failed", message: "Failed"), for: Self.registerApplication)
        manager.add(MutableService(type: BluetoothUUID(0xABC2), primary: true))
        try await waitUntil("refused") { recorder.added.withLock { $0 }.count == 2 }
        #expect(recorder.added.withLock { $0 } == ["added ABC1", "failed ABC2"])
        #expect(try await Self.exportedNodes(of: owner, on: bluez) == before)
    }

    /// Two quick `startAdvertising` calls: the second is refused while the first registers, as
    /// Core Bluetooth refuses a second advertisement, and only one advertisement is exported.
    @Test func aSecondStartWhileTheFirstRegistersIsRefused() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, recorder, owner) = try await Self.published(bluez)
        bluez.inject(.delay(.milliseconds(200)), for: Self.registerAdvertisement)
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "One"])
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Two"])
        try await waitUntil("both answered") { recorder.advertising.withLock { $0 }.count == 2 }
        #expect(recorder.advertising.withLock { $0 } == ["alreadyAdvertising", "ok"])
        #expect(bluez.adapters.first?.registeredAdvertisements.map(\.localName) == ["One"])
        let nodes = try await Self.exportedNodes(of: owner, on: bluez)
        #expect(nodes.filter { $0.hasPrefix("advertisement") }.count == 1, "\(nodes)")
    }
}
