import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

/// Published services and the advertisement come back by themselves after bluetoothd restarts
/// or the adapter is unplugged and plugged in again (issue 7).
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerSurvivalTests {
    final class Quiet: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral-survival")
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    }

    static func published(_ bluez: SimulatedBlueZ) async throws -> (PeripheralManager, Quiet) {
        let delegate = Quiet()
        let manager = PeripheralManager(
            delegate: delegate, queue: delegate.queue,
            options: PeripheralManagerOptions(adapter: "hci0", busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x01]), permissions: [.readable])
        ]
        manager.add(service)
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "HRM"])
        try await waitUntil("published and advertising") {
            bluez.adapters.first?.registeredApplications.count == 1 && manager.isAdvertising
        }
        return (manager, delegate)
    }

    @Test func servicesAndAdvertisingComeBackAfterBluetoothdRestarts() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, _) = try await Self.published(bluez)
        try await bluez.restart(downtime: .milliseconds(100))
        try await waitUntil("registered again") {
            bluez.adapters.first?.registeredApplications.count == 1
                && bluez.adapters.first?.registeredAdvertisements.first?.localName == "HRM"
        }
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
        withExtendedLifetime(manager) {}
    }

    /// Services published one by one come back after a restart in one application: one change
    /// of bluetoothd's database, so a connected central gets one Service Changed (each change
    /// makes bluetoothd answer its next request "Database Out of Sync", which crashed bluetoothd
    /// 5.87 as the central in the restoration e2e test). Removing one of them afterwards
    /// publishes the others again without it.
    @Test func servicesPublishedOneByOneComeBackTogetherAndCanStillBeRemovedOneByOne() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, _) = try await Self.published(bluez)
        var added: [MutableService] = []
        for (uuid, value) in [(UInt16(0x180A), UInt8(0x0A)), (0x180F, 0x0F)] {
            let service = MutableService(type: BluetoothUUID(uuid), primary: true)
            service.characteristics = [
                MutableCharacteristic(
                    type: BluetoothUUID(uuid &+ 0x1000), properties: [.read], value: Data([value]),
                    permissions: [.readable])
            ]
            try await manager.addService(service)
            added.append(service)
        }
        let adapter = try #require(bluez.adapters.first)
        #expect(adapter.registeredApplications.count == 3, "one application per service added")
        try await bluez.restart(downtime: .milliseconds(100))
        try await waitUntil("registered again") {
            bluez.adapters.first?.registeredApplications.flatMap(\.services).count == 3
        }
        let applications = try #require(bluez.adapters.first?.registeredApplications)
        #expect(applications.count == 1, "\(applications.map { $0.services.map(\.uuid) })")
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
        #expect(try await central.read(serviceUUID: "180A", characteristicUUID: "280A") == [0x0A])
        #expect(try await central.read(serviceUUID: "180F", characteristicUUID: "280F") == [0x0F])

        manager.remove(added[0])
        try await waitUntil("published again without 180A") {
            let services = bluez.adapters.first?.registeredApplications.flatMap(\.services).map(\.uuid) ?? []
            return services.count == 2 && !services.contains { $0.lowercased().hasPrefix("0000180a") }
        }
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
        #expect(try await central.read(serviceUUID: "180F", characteristicUUID: "280F") == [0x0F])
        withExtendedLifetime(manager) {}
    }

    @Test func servicesAndAdvertisingComeBackWhenTheAdapterIsPluggedInAgain() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (manager, _) = try await Self.published(bluez)
        let adapter = try #require(bluez.adapters.first)
        bluez.removeAdapter(adapter)
        try await waitUntil("unsupported without its adapter") { manager.state == .unsupported }
        let replugged = try bluez.addAdapter(.init(name: adapter.name, address: adapter.address))
        try await waitUntil("registered again on the new adapter") {
            replugged.registeredApplications.count == 1 && replugged.registeredAdvertisements.first?.localName == "HRM"
        }
        #expect(manager.state == .poweredOn)
    }
}
