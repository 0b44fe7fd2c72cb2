import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Included services: BlueZ resolves `Includes` only inside one GATT application, so the
/// application of a service carries the services it includes, before it.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerIncludedServicesTests {
    /// Records `didAdd` results and answers reads with `[0x5A]`.
    final class Server: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.included-services")
        let log = PosixMutex<[String]>([])
        let addErrors = PosixMutex<[BluetoothError.Code?]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            log.withLock { $0.append(error == nil ? "added \(service.uuid)" : "add failed \(service.uuid)") }
            addErrors.withLock { $0.append((error as? BluetoothError)?.code) }
        }
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            log.withLock { $0.append("read \(request.characteristic.uuid)") }
            request.value = Data([0x5A])
            peripheral.respond(to: request, withResult: .success)
        }
    }

    /// A published manager's pieces: the simulator, the manager and its delegate.
    struct Rig {
        let bluez: SimulatedBlueZ
        let manager: PeripheralManager
        let server: Server

        var applications: [SimulatedGATTApplication] { bluez.adapters.first?.registeredApplications ?? [] }
        var log: [String] { server.log.withLock { $0 } }

        static func start() async throws -> Rig {
            let bluez = try await SimulatedBlueZ.start()
            let server = Server()
            let manager = PeripheralManager(
                delegate: server, queue: server.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
            try await waitUntil("powered on") { manager.state == .poweredOn }
            return Rig(bluez: bluez, manager: manager, server: server)
        }
    }

    static let primaryUUID = "0000a5f0-0000-1000-8000-00805f9b34fb"
    static let secondaryUUID = "0000a5e0-0000-1000-8000-00805f9b34fb"

    /// A secondary service S (dynamic characteristic A5E1) and a primary P (static A5F1) including it.
    static func services() -> (primary: MutableService, secondary: MutableService) {
        let secondary = MutableService(type: BluetoothUUID(0xA5E0), primary: false)
        secondary.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xA5E1), properties: [.read], value: nil, permissions: [.readable])
        ]
        let primary = MutableService(type: BluetoothUUID(0xA5F0), primary: true)
        primary.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xA5F1), properties: [.read], value: Data([1]), permissions: [.readable])
        ]
        primary.includedServices = [secondary]
        return (primary, secondary)
    }

    /// Whether `application` is exactly S then P, with P including S.
    static func carriesBoth(_ application: SimulatedGATTApplication?) -> Bool {
        guard let application, application.serviceUUIDs == [secondaryUUID, primaryUUID] else { return false }
        let (secondary, primary) = (application.services[0], application.services[1])
        return primary.includes == [secondary.path] && secondary.includes.isEmpty && !secondary.isPrimary
            && primary.isPrimary
    }

    @Test func includedServiceIsExportedBeforeItsIncluderInOneApplication() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let (primary, _) = Self.services()
        rig.manager.add(primary)
        try await waitUntil("added") { rig.log == ["added A5F0"] }
        #expect(rig.applications.count == 1)
        #expect(Self.carriesBoth(rig.applications.first))
    }

    @Test func anIncludedServiceAddedFirstMovesIntoItsIncludersApplication() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let (primary, secondary) = Self.services()
        rig.manager.add(secondary)
        try await waitUntil("secondary added") { rig.log == ["added A5E0"] }
        let own = try #require(rig.applications.first)
        #expect(rig.applications.count == 1 && own.serviceUUIDs == [Self.secondaryUUID])
        rig.manager.add(primary)
        try await waitUntil("primary added") { rig.log == ["added A5E0", "added A5F0"] }
        #expect(rig.applications.count == 1, "the secondary's own application is unregistered")
        #expect(Self.carriesBoth(rig.applications.first))
        #expect(rig.applications.first?.path != own.path)
    }

    @Test func removingTheIncludedServiceRegistersTheIncluderWithoutIt() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let (primary, secondary) = Self.services()
        rig.manager.add(secondary)
        rig.manager.add(primary)
        try await waitUntil("both added") { rig.log == ["added A5E0", "added A5F0"] }
        try await waitUntil("one application") {
            rig.applications.count == 1 && Self.carriesBoth(rig.applications.first)
        }
        rig.manager.remove(secondary)
        try await waitUntil("primary alone") {
            rig.applications.count == 1 && rig.applications.first?.serviceUUIDs == [Self.primaryUUID]
        }
        #expect(rig.applications.first?.services.first?.includes == [])
    }

    @Test func removingTheIncluderGivesTheIncludedServiceItsApplicationBack() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let (primary, secondary) = Self.services()
        rig.manager.add(secondary)
        rig.manager.add(primary)
        try await waitUntil("both added") { rig.log == ["added A5E0", "added A5F0"] }
        let shared = try #require(rig.applications.first)
        rig.manager.remove(primary)
        try await waitUntil("secondary alone") {
            rig.applications.count == 1 && rig.applications.first?.serviceUUIDs == [Self.secondaryUUID]
        }
        #expect(rig.applications.first?.path != shared.path)
        // Adding the includer again carries the secondary again, as the first time.
        rig.manager.add(primary)
        try await waitUntil("primary added again") { rig.log.last == "added A5F0" && rig.log.count == 3 }
        try await waitUntil("one application again") {
            rig.applications.count == 1 && Self.carriesBoth(rig.applications.first)
        }
    }

    @Test func aCycleOfIncludesIsRefused() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let first = MutableService(type: BluetoothUUID(0xA5A0), primary: true)
        let second = MutableService(type: BluetoothUUID(0xA5B0), primary: false)
        first.includedServices = [second]
        second.includedServices = [first]
        rig.manager.add(first)
        try await waitUntil("refused") { rig.log == ["add failed A5A0"] }
        #expect(rig.server.addErrors.withLock { $0 } == [.invalidParameters])
        #expect(rig.applications.isEmpty)
    }

    @Test func readsOfAnIncludedServicesCharacteristicReachTheDelegate() async throws {
        let rig = try await Rig.start()
        defer { withExtendedLifetime(rig) {} }
        let (primary, _) = Self.services()
        rig.manager.add(primary)
        try await waitUntil("added") { rig.log == ["added A5F0"] }
        let central = try rig.bluez.addCentral(address: "11:22:33:44:55:66", mtu: 185)
        #expect(try await central.read(serviceUUID: Self.secondaryUUID, characteristicUUID: "a5e1") == [0x5A])
        #expect(rig.log == ["added A5F0", "read A5E1"])
        #expect(try await central.read(serviceUUID: Self.primaryUUID, characteristicUUID: "a5f1") == [1])
    }

    /// Hands the restored services of `willRestoreState` to the test.
    final class Restorer: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.included-services.restorer")
        let restored = PosixMutex<[MutableService]?>(nil)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any]) {
            let services = dict[CBPeripheralManagerRestoredStateServicesKey] as? [MutableService] ?? []
            restored.withLock { $0 = services }
        }
    }

    final class WeakManager: @unchecked Sendable {
        weak var value: PeripheralManager?
    }

    @Test func restorationKeepsTheIncludeRelation() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "bluezkit-include-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let options = PeripheralManagerOptions(
            restoreIdentifier: "included", busAddress: bluez.busAddress,
            restorationStore: RestorationStore(directory: directory))
        let adapter = try #require(bluez.adapters.first)
        let released = WeakManager()
        do {
            let server = Server()
            let manager = PeripheralManager(delegate: server, queue: server.queue, options: options)
            released.value = manager
            try await waitUntil("powered on") { manager.state == .poweredOn }
            manager.add(Self.services().primary)
            try await waitUntil("added") { server.log.withLock { $0 } == ["added A5F0"] }
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        try await waitUntil("its application is gone") { adapter.registeredApplications.isEmpty }

        let restorer = Restorer()
        let manager = PeripheralManager(delegate: restorer, queue: restorer.queue, options: options)
        defer { withExtendedLifetime(manager) {} }
        try await waitUntil("restored") { restorer.restored.withLock { $0 } != nil }
        let restored = restorer.restored.withLock { $0 } ?? []
        #expect(restored.map(\.uuid) == [BluetoothUUID(0xA5F0)], "only the added service is restored as added")
        let included = restored.first?.includedServices ?? []
        #expect(included.map(\.uuid) == [BluetoothUUID(0xA5E0)])
        #expect(included.first?.isPrimary == false)
        #expect(included.first?.characteristics?.map(\.uuid) == [BluetoothUUID(0xA5E1)])
        try await waitUntil("published again with its included service") {
            adapter.registeredApplications.count == 1 && Self.carriesBoth(adapter.registeredApplications.first)
        }
    }
}
