import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

/// `peripheral(_:didModifyServices:)`: the peripheral's GATT database changing while connected.
@Suite(.timeLimit(.minutes(5))) struct CentralServiceChangeTests {
    /// Records modifications, discoveries, values and notification states, in order.
    final class ChangeDelegate: PeripheralDelegate, @unchecked Sendable {
        private let log = PosixMutex<([String], [any Error])>(([], []))
        var events: [String] { log.withLock { $0.0 } }
        var errors: [any Error] { log.withLock { $0.1 } }
        var modifications: [String] { events.filter { $0.hasPrefix("modified") } }

        private func record(_ event: String, _ error: (any Error)? = nil) {
            log.withLock { log in
                log.0.append(error == nil ? event : event + " error")
                if let error { log.1.append(error) }
            }
        }

        func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
            let left = (peripheral.services ?? []).map(\.uuid.uuidString).joined(separator: ",")
            record("modified [\(invalidatedServices.map(\.uuid.uuidString).joined(separator: ","))] left \(left)")
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
            record("services " + (peripheral.services ?? []).map(\.uuid.uuidString).joined(separator: ","), error)
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
            record("characteristics \(service.uuid)", error)
        }
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            record("value \(characteristic.uuid)", error)
        }
        func peripheral(
            _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
        ) {
            record("notifying \(characteristic.uuid) \(characteristic.isNotifying)", error)
        }
    }

    struct Connected {
        let fixture: CentralFixture
        let sensor: SimulatedPeripheral
        let peripheral: Peripheral
        let delegate: ChangeDelegate
        let level: SimulatedCharacteristic
    }

    /// A sensor with Heart Rate (`180D`) and Battery (`180F`, notifying level `2A19`) after the GATT
    /// service (`1801`), connected;
    /// with `discover`, its services found.
    static func connect(discover: Bool = true, usesNotifySockets: Bool = true) async throws -> Connected {
        let level = SimulatedCharacteristic(uuid: "2A19", flags: ["read", "notify"], value: [90])
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:05", name: "Changing", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1])]),
                SimulatedService(uuid: "180F", characteristics: [level]),
            ])
        let fixture = try await CentralFixture.make(usesNotifySockets: usesNotifySockets)
        try fixture.bluez.addPeripheral(sensor)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: sensor)
        let delegate = ChangeDelegate()
        peripheral.delegate = delegate
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        if discover {
            peripheral.discoverServices(nil)
            try await waitUntil("services") { delegate.events.contains { $0.hasPrefix("services") } }
        }
        return Connected(fixture: fixture, sensor: sensor, peripheral: peripheral, delegate: delegate, level: level)
    }

    static func service(_ uuid: UInt16, of peripheral: Peripheral) throws -> Service {
        try #require(peripheral.services?.first { $0.uuid == BluetoothUUID(uuid) })
    }

    @Test func aRemovedServiceIsInvalidatedAndLeavesTheServices() async throws {
        let rig = try await Self.connect()
        defer { withExtendedLifetime(rig.fixture) {} }
        #expect(rig.peripheral.services?.map(\.uuid.uuidString) == ["1801", "180D", "180F"])
        try rig.sensor.removeService(uuid: "180F")
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        #expect(rig.delegate.modifications == ["modified [180F] left 1801,180D"])
        #expect(rig.peripheral.services?.map(\.uuid.uuidString) == ["1801", "180D"])
        rig.peripheral.discoverServices(nil)
        try await waitUntil("rediscovered") { rig.delegate.events.last?.hasPrefix("services") == true }
        #expect(rig.delegate.events.last == "services 1801,180D")
    }

    @Test func anAddedServiceGivesAnEmptyListAndIsFoundByDiscovery() async throws {
        let rig = try await Self.connect()
        defer { withExtendedLifetime(rig.fixture) {} }
        try rig.sensor.addService(SimulatedService(uuid: "1810"))
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        #expect(rig.delegate.modifications == ["modified [] left 1801,180D,180F"])
        rig.peripheral.discoverServices(nil)
        try await waitUntil("rediscovered") { rig.delegate.events.last?.hasPrefix("services") == true }
        #expect(rig.delegate.events.last == "services 1801,180D,180F,1810")
    }

    @Test func aReplacedServiceGivesOneCallback() async throws {
        let rig = try await Self.connect()
        defer { withExtendedLifetime(rig.fixture) {} }
        let battery = try Self.service(0x180F, of: rig.peripheral)
        try rig.sensor.replaceService(
            uuid: "180F",
            with: SimulatedService(
                uuid: "181A", characteristics: [SimulatedCharacteristic(uuid: "2A6E", flags: ["read"], value: [7])]))
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        rig.peripheral.discoverServices(nil)
        try await waitUntil("rediscovered") { rig.delegate.events.last?.hasPrefix("services") == true }
        #expect(rig.delegate.modifications == ["modified [180F] left 1801,180D"])
        #expect(rig.delegate.events.last == "services 1801,180D,181A")
        #expect(rig.peripheral.services?.contains { $0 === battery } == false)
    }

    @Test(arguments: [true, false])
    func aSubscriptionToARemovedServiceEnds(usesNotifySockets: Bool) async throws {
        let rig = try await Self.connect(usesNotifySockets: usesNotifySockets)
        defer { withExtendedLifetime(rig.fixture) {} }
        let battery = try Self.service(0x180F, of: rig.peripheral)
        rig.peripheral.discoverCharacteristics(nil, for: battery)
        try await waitUntil("characteristics") { rig.delegate.events.contains("characteristics 180F") }
        let level = try #require(battery.characteristics?.first)
        rig.peripheral.setNotifyValue(true, for: level)
        try await waitUntil("notifying") { rig.delegate.events.contains("notifying 2A19 true") }
        #expect(rig.sensor.updateValue([1], for: rig.level))
        try await waitUntil("a value") { rig.delegate.events.contains("value 2A19") }
        try rig.sensor.removeService(uuid: "180F")
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        let before = rig.delegate.events
        #expect(!rig.sensor.updateValue([2], for: rig.level))
        // A read of what is left goes through; no value of the removed characteristic came before it.
        let location = try Self.service(0x180D, of: rig.peripheral)
        rig.peripheral.discoverCharacteristics(nil, for: location)
        try await waitUntil("characteristics") { rig.delegate.events.contains("characteristics 180D") }
        rig.peripheral.readValue(for: try #require(location.characteristics?.first))
        try await waitUntil("read") { rig.delegate.events.contains("value 2A38") }
        #expect(rig.delegate.events.dropFirst(before.count).filter { $0.contains("2A19") }.isEmpty)
    }

    @Test func nothingIsReportedBeforeTheFirstDiscovery() async throws {
        let rig = try await Self.connect(discover: false)
        defer { withExtendedLifetime(rig.fixture) {} }
        try rig.sensor.removeService(uuid: "180F")
        rig.peripheral.discoverServices(nil)
        try await waitUntil("services") { rig.delegate.events.contains { $0.hasPrefix("services") } }
        #expect(rig.delegate.events == ["services 1801,180D"])
        // A change after it is reported, and is the only one.
        try rig.sensor.addService(SimulatedService(uuid: "1810"))
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        #expect(rig.delegate.events == ["services 1801,180D", "modified [] left 1801,180D"])
    }

    @Test func readingACharacteristicOfAnInvalidatedServiceFails() async throws {
        let rig = try await Self.connect()
        defer { withExtendedLifetime(rig.fixture) {} }
        let battery = try Self.service(0x180F, of: rig.peripheral)
        rig.peripheral.discoverCharacteristics(nil, for: battery)
        try await waitUntil("characteristics") { rig.delegate.events.contains("characteristics 180F") }
        let level = try #require(battery.characteristics?.first)
        // Another service takes the same handles (and object paths): the old object must not reach it.
        try rig.sensor.replaceService(
            uuid: "180F",
            with: SimulatedService(
                uuid: "181A", characteristics: [SimulatedCharacteristic(uuid: "2A6E", flags: ["read"], value: [7])]))
        try await waitUntil("modified") { !rig.delegate.modifications.isEmpty }
        rig.peripheral.readValue(for: level)
        try await waitUntil("read failed") { rig.delegate.events.contains("value 2A19 error") }
        let error = try #require(rig.delegate.errors.last as? BluetoothError)
        #expect(error.code == .invalidHandle)
        #expect(level.value == nil)
    }
}
