import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// `requests()`: the async form of `didReceiveRead`/`didReceiveWrite`.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerRequestStreamTests {
    /// A manager without a delegate that publishes one readable and writable characteristic.
    static func publish() async throws -> (SimulatedBlueZ, PeripheralManager) {
        let bluez = try await SimulatedBlueZ.start()
        let manager = PeripheralManager(
            delegate: nil, queue: DispatchQueue(label: "test.requests"),
            options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.read, .write], value: nil, permissions: [.readable, .writeable])
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [characteristic]
        try await manager.addService(service)
        return (bluez, manager)
    }

    @Test func aStreamConsumerAnswersReadsAndWrites() async throws {
        let (bluez, manager) = try await Self.publish()
        defer { bluez.stop() }
        let requests = manager.requests()
        let consumer = Task { () -> [String] in
            var seen: [String] = []
            for await request in requests {
                switch request {
                case .read(let read):
                    read.value = Data([0x2A, 0x2B])
                    manager.respond(to: read, withResult: .success)
                    seen.append("read \(read.characteristic.uuid)")
                case .write(let writes):
                    manager.respond(to: writes[0], withResult: .success)
                    seen.append("write \(writes.map { Array($0.value ?? Data()) })")
                }
                if seen.count == 2 { break }
            }
            return seen
        }
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01") == [0x2A, 0x2B])
        try await central.write(serviceUUID: "ABCD", characteristicUUID: "AB01", value: [7, 8])
        #expect(await consumer.value == ["read AB01", "write [[7, 8]]"])
    }

    @Test func withoutADelegateOrAStreamRequestsAreNotSupported() async throws {
        let (bluez, manager) = try await Self.publish()
        defer { bluez.stop() }
        let central = try bluez.addCentral(address: "11:22:33:44:55:77")
        await #expect(throws: SimulatedATTError.requestNotSupported) {
            _ = try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01")
        }
        await #expect(throws: SimulatedATTError.requestNotSupported) {
            try await central.write(serviceUUID: "ABCD", characteristicUUID: "AB01", value: [1])
        }
        withExtendedLifetime(manager) {}
    }
}
