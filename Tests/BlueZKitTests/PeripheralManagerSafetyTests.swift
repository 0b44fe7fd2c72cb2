import BlueZKit
import BlueZKitTesting
import DBus
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Our exported GATT objects answer only bluetoothd (the owner of org.bluez), and the values we
/// send reach only bluetoothd.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerSafetyTests {
    final class Server: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.safety")
        let reads = PosixMutex(0)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
            reads.withLock { $0 += 1 }
            request.value = Data([7])
            peripheral.respond(to: request, withResult: .success)
        }
    }

    /// A powered-on manager on a simulated bluetoothd that published service ABCD with `characteristic`.
    static func publish(_ characteristic: MutableCharacteristic) async throws -> (
        SimulatedBlueZ, Server, PeripheralManager
    ) {
        let bluez = try await SimulatedBlueZ.start()
        let server = Server()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [characteristic]
        manager.add(service)
        try await waitUntil("published") { bluez.adapters.first?.registeredApplications.count == 1 }
        return (bluez, server, manager)
    }

    @Test func anotherProcessOnTheBusIsRefused() async throws {
        let characteristic = MutableCharacteristic(
            type: BluetoothUUID(0xAB01), properties: [.read, .write], value: nil, permissions: [.readable, .writeable])
        let (bluez, server, manager) = try await Self.publish(characteristic)
        defer { withExtendedLifetime(manager) { bluez.stop() } }
        let application = try #require(bluez.adapters.first?.registeredApplications.first)
        let path = try ObjectPath(try #require(application.services.first?.characteristics.first?.path))
        let intruder = try await DBusConnection.open(address: bluez.busAddress)
        defer { intruder.close() }
        for (member, arguments) in [
            ("ReadValue", [DBusValue.stringVariantDictionary([:])]),
            ("WriteValue", [.bytes([1]), .stringVariantDictionary([:])]),
            ("StartNotify", []),
        ] as [(MemberName, [DBusValue])] {
            do {
                _ = try await intruder.call(
                    destination: try BusName(application.owner), path: path, interface: "org.bluez.GattCharacteristic1",
                    member: member, arguments: arguments)
                Issue.record("\(member) from another process was answered")
            } catch {
                #expect(error.code == .accessDenied, "\(member): \(error)")
            }
        }
        #expect(server.reads.withLock { $0 } == 0, "nothing reached the app")
        // bluetoothd itself still gets through.
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01") == [7])
        #expect(server.reads.withLock { $0 } == 1)
    }

    /// A characteristic's new value is a `PropertiesChanged` signal addressed to bluetoothd: another
    /// process with a match rule for `PropertiesChanged` (no eavesdropping) never sees it, while
    /// bluetoothd still gets it and notifies the subscribed central.
    @Test func updatedValuesReachBluetoothdAndNoOtherProcess() async throws {
        let secret = MutableCharacteristic(
            type: BluetoothUUID(0xAB02), properties: [.notify], value: nil, permissions: [.readable])
        let (bluez, _, manager) = try await Self.publish(secret)
        defer { bluez.stop() }

        let snoop = try await DBusConnection.open(address: bluez.busAddress)
        defer { snoop.close() }
        let seen = PosixMutex<[String]>([])
        let rule = DBusMatchRule(interface: .properties, member: "PropertiesChanged")
        let subscription = try await snoop.subscribe(rule) { message in
            seen.withLock { $0.append(message.path?.rawValue ?? "?") }
        }
        defer { subscription.cancel() }
        let central = try bluez.addCentral(address: "11:22:33:44:55:68")
        let values = try await central.subscribe(serviceUUID: "ABCD", characteristicUUID: "AB02")
        try await waitUntil("subscribed") { secret.subscribedCentrals?.isEmpty == false }
        #expect(manager.updateValue(Data([0x5E, 0xC2]), for: secret, onSubscribedCentrals: nil))
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == [0x5E, 0xC2])
        // The snooper's rule does see a broadcast `PropertiesChanged`, of a third process.
        let broadcaster = try await DBusConnection.open(address: bluez.busAddress)
        defer { broadcaster.close() }
        broadcaster.emitPropertiesChanged(
            path: try ObjectPath("/probe"), interface: "org.bluez.GattCharacteristic1", changed: ["Value": .bytes([1])])
        try await waitUntil("the broadcast seen") { seen.withLock { $0 }.contains("/probe") }
        // One round trip through the bus: a broadcast of our value routed before it would have arrived first.
        _ = try await snoop.nameOwner(of: "org.bluez")
        #expect(seen.withLock { $0 }.filter { $0.hasPrefix("/org/bluezkit/") } == [])
    }
}
