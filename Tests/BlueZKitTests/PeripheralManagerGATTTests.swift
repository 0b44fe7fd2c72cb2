import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerGATTTests {
    /// Answers reads with a counter and accepts writes of 0x01 only.
    final class Server: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.gatt-server")
        let log = PosixMutex<[String]>([])
        let reads = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            log.withLock { $0.append(error == nil ? "added \(service.uuid)" : "add failed") }
        }
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            let count = reads.withLock { value -> Int in
                value += 1
                return value
            }
            request.value = Data([UInt8(count), 0xAA, 0xBB].dropFirst(request.offset))
            log.withLock {
                $0.append("read offset \(request.offset) mtu-3 \(request.central.maximumUpdateValueLength)")
            }
            peripheral.respond(to: request, withResult: .success)
        }
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
            guard let first = requests.first else { return }
            log.withLock { $0.append("write \(first.value.map { Array($0) } ?? [])") }
            peripheral.respond(to: first, withResult: first.value == Data([0x01]) ? .success : .application(0x80))
        }
    }

    static let serviceUUID = "0000abcd-0000-1000-8000-00805f9b34fb"

    static func published() async throws -> (
        SimulatedBlueZ, PeripheralManager, Server, MutableCharacteristic, SimulatedCentral
    ) {
        let bluez = try await SimulatedBlueZ.start()
        let server = Server()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let counter = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.read, .notify], value: nil, permissions: [.readable])
        let fixed = MutableCharacteristic(
            type: BluetoothUUID(0xAB02), properties: [.read], value: Data([1, 2, 3]), permissions: [.readable])
        let command = MutableCharacteristic(
            type: BluetoothUUID(0xAB03), properties: [.write], value: nil, permissions: [.writeable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [counter, fixed, command]
        manager.add(service)
        try await waitUntil("added") { server.log.withLock { $0 } == ["added ABCD"] }
        #expect(
            bluez.adapters.first?.registeredApplications.first?.serviceUUIDs.map { $0.lowercased() } == [serviceUUID])
        let central = try bluez.addCentral(address: "11:22:33:44:55:66", mtu: 185)
        return (bluez, manager, server, counter, central)
    }

    @Test func answersStaticAndDynamicReads() async throws {
        let (bluez, manager, server, _, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        #expect(try await central.read(serviceUUID: Self.serviceUUID, characteristicUUID: "ab02") == [1, 2, 3])
        #expect(try await central.read(serviceUUID: Self.serviceUUID, characteristicUUID: "ab02", offset: 2) == [3])
        await #expect(throws: SimulatedATTError.invalidOffset) {
            _ = try await central.read(serviceUUID: Self.serviceUUID, characteristicUUID: "ab02", offset: 9)
        }
        // Static values never reach the delegate.
        #expect(server.log.withLock { $0 } == ["added ABCD"])
        #expect(try await central.read(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01") == [1, 0xAA, 0xBB])
        #expect(
            try await central.read(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01", offset: 1) == [
                0xAA, 0xBB,
            ])
        #expect(server.log.withLock { $0 }.suffix(2) == ["read offset 0 mtu-3 182", "read offset 1 mtu-3 182"])
    }

    @Test func passesWritesAndTheirATTResults() async throws {
        let (bluez, manager, server, _, central) = try await Self.published()
        defer { withExtendedLifetime((bluez, manager)) {} }
        try await central.write(serviceUUID: Self.serviceUUID, characteristicUUID: "ab03", value: [0x01])
        await #expect(throws: SimulatedATTError(code: 0x80)) {
            try await central.write(serviceUUID: Self.serviceUUID, characteristicUUID: "ab03", value: [0x02])
        }
        #expect(server.log.withLock { $0 }.suffix(2) == ["write [1]", "write [2]"])
    }

    @Test func updatesReachSubscribers() async throws {
        let (bluez, manager, _, counter, central) = try await Self.published()
        defer { withExtendedLifetime(bluez) {} }
        let values = try await central.subscribe(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01")
        #expect(manager.updateValue(Data([0x42]), for: counter, onSubscribedCentrals: nil))
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == [0x42])
        let unpublished = MutableCharacteristic(
            type: BluetoothUUID(0xFFFF), properties: [.notify], value: nil, permissions: [])
        #expect(!manager.updateValue(Data([1]), for: unpublished, onSubscribedCentrals: nil))
    }

    @Test func removesServices() async throws {
        let (bluez, manager, _, _, _) = try await Self.published()
        manager.removeAllServices()
        try await waitUntil("unregistered") { bluez.adapters.first?.registeredApplications.isEmpty == true }
    }

    @Test func advertisesWhatFits() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = PeripheralManagerTests.Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "HRM", CBAdvertisementDataServiceUUIDsKey: [BluetoothUUID(0x180D)],
        ])
        try await waitUntil("advertising") { recorder.errors.withLock { $0.count } == 1 }
        #expect(recorder.errors.withLock { $0.first! } == nil)
        #expect(manager.isAdvertising)
        let advertisement = try #require(bluez.adapters.first?.registeredAdvertisements.first)
        #expect(advertisement.localName == "HRM")
        manager.stopAdvertising()
        try await waitUntil("stopped") { bluez.adapters.first?.registeredAdvertisements.isEmpty == true }
        #expect(!manager.isAdvertising)
    }
}
