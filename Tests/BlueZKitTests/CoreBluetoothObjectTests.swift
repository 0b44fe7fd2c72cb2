import BlueZKitTesting
import Foundation
import TestSupport
import Testing

@testable import BlueZKit

/// The NSObject API code written for Core Bluetooth calls on its objects (`isEqual(_:)`, `hash`,
/// `%@` in `String(format:)` and `NSLog`), on BlueZKit's types: a UUID value type and Swift
/// classes, none of them an NSObject subclass.
@Suite(.timeLimit(.minutes(1))) struct CoreBluetoothObjectTests {
    @Test func aUUIDFormatsWithPercentAtAsItsUUIDString() {
        let heartRate = CBUUID(string: "0x180d")
        let long = CBUUID(string: "71da3fd1-7e10-41c1-b16f-4430b506cde7")
        let thirtyTwo = CBUUID(string: "1234abcd")
        #expect(String(format: "%@", heartRate) == "180D")
        #expect(String(format: "%@", long) == "71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(String(format: "%@", thirtyTwo) == "1234ABCD")
        // Among other arguments, through an argument array and through NSString.
        #expect(
            String(format: "service %@ has %d characteristics, first %@", heartRate, 3, thirtyTwo)
                == "service 180D has 3 characteristics, first 1234ABCD")
        let arguments: [any CVarArg] = [heartRate, long]
        #expect(String(format: "%@/%@", arguments: arguments) == "180D/71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(NSString(format: "<%@>", heartRate) as String == "<180D>")
        // Formatted many times, the strings stay alive while the list is in use.
        for _ in 0..<1000 { #expect(String(format: "%@%@", heartRate, heartRate) == "180D180D") }
        NSLog("CoreBluetoothObjectTests: %@ %@ %@", heartRate, long, thirtyTwo)
        #expect(!heartRate._cVarArgEncoding.isEmpty, "asked directly, the encoding does not trap")
    }

    @Test func aUUIDIsEqualToTheSameValueOnly() {
        let short = CBUUID(string: "180D")
        let full = CBUUID(string: "0000180D-0000-1000-8000-00805F9B34FB")
        #expect(short.isEqual(full))
        #expect(full.isEqual(short))
        #expect(short.isEqual(CBUUID(data: Data([0x18, 0x0D]))))
        #expect(short.hash == full.hash)
        #expect(!short.isEqual(CBUUID(string: "180F")))
        #expect(!short.isEqual(nil))
        #expect(!short.isEqual("180D"), "a string is not a UUID")
        #expect(!short.isEqual(full.uuid), "nor is a Foundation UUID")
        let optional: CBUUID? = full
        #expect(short.isEqual(optional))
        // Still a value: a dictionary key and ==, as callers use it.
        var names: [CBUUID: String] = [short: "Heart Rate"]
        names[full, default: "?"] += " Service"
        #expect(names == [CBUUID(string: "180d"): "Heart Rate Service"])
        #expect(short == full)
    }

    @Test func remoteObjectsAreEqualToThemselvesOnlyAndFormatAsTheirDescription() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:34:01", name: "Objects", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        SimulatedCharacteristic(
                            uuid: "2A37", flags: ["notify"], descriptors: [SimulatedDescriptor(uuid: "2901")]),
                        SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01]),
                    ])
            ])
        let other = SimulatedPeripheral(address: "C0:FF:EE:00:34:02", name: "Other", serviceUUIDs: ["180F"])
        try bluez.addPeripheral(sensor)
        try bluez.addPeripheral(other)
        let queue = DispatchQueue(label: "test.objects")
        let central = CBCentralManager(
            delegate: nil, queue: queue, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { central.state == .poweredOn }
        let peripheral = try await firstDiscovery(central, scanningFor: [CBUUID(string: "180D")], advertising: sensor)
        let otherPeripheral = try await firstDiscovery(
            central, scanningFor: [CBUUID(string: "180F")], advertising: other)
        try await central.connect(to: peripheral)
        let service = try #require(try await peripheral.discoverServices(matching: [CBUUID(string: "180D")]).first)
        let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
        #expect(characteristics.count == 2)
        let measurement = try #require(characteristics.first { $0.uuid.isEqual(CBUUID(string: "2A37")) })
        let location = try #require(characteristics.first { $0.uuid.isEqual(CBUUID(string: "2A38")) })
        let descriptor = try #require(try await peripheral.discoverDescriptors(of: measurement).first)

        #expect(peripheral.isEqual(peripheral))
        #expect(!peripheral.isEqual(otherPeripheral))
        #expect(!peripheral.isEqual(nil))
        #expect(!peripheral.isEqual(service), "another type")
        #expect(!peripheral.isEqual(peripheral.identifier), "its identifier is not the peripheral")
        let found: CBPeripheral? = peripheral
        #expect(peripheral.isEqual(found))
        #expect(service.isEqual(peripheral.services?.first))
        #expect(measurement.isEqual(measurement) && !measurement.isEqual(location))
        #expect(descriptor.isEqual(measurement.descriptors?.first) && !descriptor.isEqual(measurement))
        #expect((peripheral as any CBPeer).isEqual(peripheral))
        for (object, same) in [(peripheral, found!), (otherPeripheral, otherPeripheral)] {
            #expect(object.isEqual(same) && object.hash == same.hash)
        }

        // %@ prints each object's description.
        #expect(String(format: "%@", peripheral) == peripheral.description)
        #expect(String(format: "%@", peripheral as any CBPeer) == peripheral.description)
        #expect(
            String(format: "%@ | %@ | %@", service, measurement, descriptor)
                == "\(service.description) | \(measurement.description) | \(descriptor.description)")
        #expect(String(format: "%@", peripheral).contains(peripheral.identifier.uuidString))
        NSLog("CoreBluetoothObjectTests: %@ %@ %@ %@", peripheral, service, location, descriptor)

        // The managers: `central.isEqual(centralManager)` and `==` in a delegate serving two.
        let second = CBCentralManager(
            delegate: nil, queue: queue, options: [BlueZKitOptionBusAddressKey: "unix:path=/nonexistent"])
        #expect(central.isEqual(central) && central == central && !central.isEqual(second) && central != second)
        #expect(!central.isEqual(peripheral))
        #expect(String(format: "%@", central).hasPrefix("<CentralManager: 0x"))
        withExtendedLifetime(central) {}
    }

    @Test func publishedObjectsRequestsAndCentralsHaveTheNSObjectAPI() {
        let service = CBMutableService(type: CBUUID(string: "180D"), primary: true)
        let characteristic = CBMutableCharacteristic(
            type: CBUUID(string: "2A38"), properties: [.read], value: nil, permissions: [.readable])
        let descriptor = CBMutableDescriptor(type: CBUUID(string: "2901"), value: "Location")
        service.characteristics = [characteristic]
        #expect(service.isEqual(service) && !service.isEqual(CBMutableService(type: service.uuid, primary: true)))
        #expect(characteristic.isEqual(service.characteristics?.first) && !characteristic.isEqual(service))
        #expect(descriptor.isEqual(descriptor) && !descriptor.isEqual(nil))
        #expect(String(format: "%@", service) == service.description)
        #expect(String(format: "%@ %@", characteristic, descriptor) == "\(characteristic) \(descriptor)")

        let identifier = UUID()
        let central = CBCentral(identifier: identifier, maximumUpdateValueLength: 20)
        let sameCentral = CBCentral(identifier: identifier, maximumUpdateValueLength: 182)
        #expect(central.isEqual(sameCentral) && central.hash == sameCentral.hash, "a central is its identifier")
        #expect(!central.isEqual(CBCentral(identifier: UUID(), maximumUpdateValueLength: 20)))
        #expect(String(format: "%@", central) == central.description)

        let request = CBATTRequest(
            central: central, characteristic: characteristic, offset: 0, value: nil, bluez: nil, timeout: .seconds(1),
            queue: DispatchQueue(label: "test.request"))
        let another = CBATTRequest(
            central: central, characteristic: characteristic, offset: 0, value: nil, bluez: nil, timeout: .seconds(1),
            queue: DispatchQueue(label: "test.request"))
        #expect(request.isEqual(request) && !request.isEqual(another) && request.hash == request.hash)
        #expect(String(format: "%@", request) == request.description)
        NSLog("CoreBluetoothObjectTests: %@ %@ %@ %@", service, characteristic, central, request)

        let manager = CBPeripheralManager(
            delegate: nil, queue: nil, options: [BlueZKitOptionBusAddressKey: "unix:path=/nonexistent"])
        #expect(manager.isEqual(manager) && manager.hash == manager.hash && !manager.isEqual(nil))
        #expect(String(format: "%@", manager).hasPrefix("<PeripheralManager: 0x"))
    }
}
