import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

/// Records what a peripheral reports, in order.
final class RecordingPeripheralDelegate: PeripheralDelegate, @unchecked Sendable {
    private let log = PosixMutex<[String]>([])
    private let errors = PosixMutex<[any Error]>([])
    var events: [String] { log.withLock { $0 } }
    var lastError: (any Error)? { errors.withLock { $0.last } }

    private func record(_ event: String, _ error: (any Error)?) {
        log.withLock { $0.append(error == nil ? event : event + " error") }
        if let error { errors.withLock { $0.append(error) } }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        record("services " + (peripheral.services ?? []).map(\.uuid.uuidString).joined(separator: ","), error)
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record(
            "characteristics " + (service.characteristics ?? []).map(\.uuid.uuidString).joined(separator: ","), error)
    }
    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {
        record("descriptors " + (characteristic.descriptors ?? []).map(\.uuid.uuidString).joined(separator: ","), error)
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        let hex = (characteristic.value ?? Data()).map { String(format: "%02x", $0) }.joined()
        record("value \(characteristic.uuid) \(hex)", error)
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {
        record("descriptor value \(descriptor.uuid)", error)
    }
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        record("wrote \(characteristic.uuid)", error)
    }
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        record("notifying \(characteristic.uuid) \(characteristic.isNotifying)", error)
    }
}

@Suite(.timeLimit(.minutes(5))) struct CentralGATTTests {
    final class ControlPoint: Sendable {
        let writes = PosixMutex<[[UInt8]]>([])
    }

    /// A heart-rate sensor with a GATT database, connected, with its services discovered.
    static func connectedSensor(controlPoint: ControlPoint = ControlPoint()) async throws -> (
        CentralFixture, SimulatedPeripheral, Peripheral, RecordingPeripheralDelegate, SimulatedCharacteristic
    ) {
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let location = SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01])
        let control = SimulatedCharacteristic(
            uuid: "2A39", flags: ["write"],
            onWrite: { request throws(SimulatedATTError) in
                guard request.value == [0x01] else { throw SimulatedATTError(code: 0x80) }
                controlPoint.writes.withLock { $0.append(request.value) }
            })
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:01", name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(uuid: "180D", characteristics: [measurement, location, control]),
                SimulatedService(
                    uuid: "180F", characteristics: [SimulatedCharacteristic(uuid: "2A19", flags: ["read"], value: [90])]
                ),
            ])
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        fixture.central.stopScan()
        let peripheral = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral
        let delegate = RecordingPeripheralDelegate()
        peripheral.delegate = delegate
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        return (fixture, sensor, peripheral, delegate, measurement)
    }

    @Test func discoversServicesAndCharacteristicsWithUUIDFilters() async throws {
        let (fixture, _, peripheral, delegate, _) = try await Self.connectedSensor()
        defer { withExtendedLifetime(fixture) {} }
        peripheral.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { delegate.events.count == 1 }
        #expect(delegate.events == ["services 180D"])
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics([BluetoothUUID(0x2A38), BluetoothUUID(0x2A39)], for: service)
        try await waitUntil("characteristics") { delegate.events.count == 2 }
        #expect(delegate.events.last == "characteristics 2A38,2A39")
        let location = try #require(service.characteristics?.first)
        #expect(location.properties == .read)
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("all characteristics") { delegate.events.count == 3 }
        #expect(service.characteristics?.map(\.uuid.uuidString).sorted() == ["2A37", "2A38", "2A39"])
        // The same objects are handed out again.
        #expect(service.characteristics?.contains { $0 === location } == true)
    }

    @Test func readsWritesAndMapsATTErrors() async throws {
        let controlPoint = ControlPoint()
        let (fixture, _, peripheral, delegate, _) = try await Self.connectedSensor(controlPoint: controlPoint)
        defer { withExtendedLifetime(fixture) {} }
        peripheral.discoverServices(nil)
        try await waitUntil("services") { delegate.events.count == 1 }
        let service = try #require(peripheral.services?.first { $0.uuid == BluetoothUUID(0x180D) })
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { delegate.events.count == 2 }
        let characteristics = try #require(service.characteristics)
        let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        let control = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A39) })
        peripheral.readValue(for: location)
        try await waitUntil("read") { delegate.events.count == 3 }
        #expect(delegate.events.last == "value 2A38 01")
        #expect(location.value == Data([0x01]))
        peripheral.writeValue(Data([0x01]), for: control, type: .withResponse)
        try await waitUntil("written") { delegate.events.count == 4 }
        #expect(delegate.events.last == "wrote 2A39")
        #expect(controlPoint.writes.withLock { $0 } == [[0x01]])
        peripheral.writeValue(Data([0x07]), for: control, type: .withResponse)
        try await waitUntil("refused") { delegate.events.count == 5 }
        #expect(delegate.events.last == "wrote 2A39 error")
        let refusal = try #require(delegate.lastError as? ATTError)
        #expect(refusal.code == .application(0x80))
        // Reading a characteristic that cannot be read gives BlueZ's error as an ATT error.
        peripheral.readValue(for: control)
        try await waitUntil("read refused") { delegate.events.count == 6 }
        #expect((delegate.lastError as? ATTError)?.code == .readNotPermitted)
    }

    @Test func deliversNotificationsUntilUnsubscribed() async throws {
        let (fixture, _, peripheral, delegate, measurement) = try await Self.connectedSensor()
        defer { withExtendedLifetime(fixture) {} }
        peripheral.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { delegate.events.count == 1 }
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics([BluetoothUUID(0x2A37)], for: service)
        try await waitUntil("characteristics") { delegate.events.count == 2 }
        let heartRate = try #require(service.characteristics?.first)
        peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { delegate.events.count == 3 }
        #expect(delegate.events.last == "notifying 2A37 true")
        #expect(measurement.isNotifying)
        for bpm in [72, 73, 74] as [UInt8] { _ = measurement.notify([0x00, bpm]) }
        try await waitUntil("three notifications") { delegate.events.count == 6 }
        #expect(Array(delegate.events.suffix(3)) == ["value 2A37 0048", "value 2A37 0049", "value 2A37 004a"])
        peripheral.setNotifyValue(false, for: heartRate)
        try await waitUntil("unsubscribed") { delegate.events.count == 7 }
        #expect(delegate.events.last == "notifying 2A37 false")
        #expect(!heartRate.isNotifying)
    }

    /// Values reach the characteristic the app subscribed to through every change of the
    /// subscription and of the link (the engine remembers where a characteristic's values go,
    /// and forgets it whenever its model changes).
    @Test func notificationsFollowResubscriptionsAndNewLinks() async throws {
        let (fixture, _, peripheral, delegate, measurement) = try await Self.connectedSensor()
        defer { withExtendedLifetime(fixture) {} }
        func subscribedHeartRate() async throws -> Characteristic {
            peripheral.discoverServices([BluetoothUUID(0x180D)])
            try await waitUntil("services") { delegate.events.last?.hasPrefix("services") == true }
            let service = try #require(peripheral.services?.first)
            peripheral.discoverCharacteristics([BluetoothUUID(0x2A37)], for: service)
            try await waitUntil("characteristics") { delegate.events.last?.hasPrefix("characteristics") == true }
            let heartRate = try #require(service.characteristics?.first)
            peripheral.setNotifyValue(true, for: heartRate)
            try await waitUntil("subscribed") { delegate.events.last == "notifying 2A37 true" }
            return heartRate
        }
        func notify(_ byte: UInt8) async throws {
            #expect(measurement.notify([0x00, byte]))
            try await waitUntil("value \(byte)") { delegate.events.last?.hasPrefix("value 2A37 00") == true }
        }
        let first = try await subscribedHeartRate()
        try await notify(1)
        peripheral.setNotifyValue(false, for: first)
        try await waitUntil("unsubscribed") { delegate.events.last == "notifying 2A37 false" }
        peripheral.setNotifyValue(true, for: first)
        try await waitUntil("subscribed again") { delegate.events.last == "notifying 2A37 true" }
        try await notify(2)
        #expect(first.value == Data([0x00, 0x02]))

        // A new link: its values reach the characteristic discovered on it.
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { peripheral.state == .disconnected }
        fixture.central.connect(peripheral)
        try await waitUntil("connected again") { peripheral.state == .connected }
        let second = try await subscribedHeartRate()
        try await notify(3)
        #expect(second.value == Data([0x00, 0x03]))
        #expect(
            delegate.events.filter { $0.hasPrefix("value") } == [
                "value 2A37 0001", "value 2A37 0002", "value 2A37 0003",
            ])
    }

    @Test func failsFastWhenNotConnected() async throws {
        let (fixture, _, peripheral, delegate, _) = try await Self.connectedSensor()
        peripheral.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { delegate.events.count == 1 }
        let service = try #require(peripheral.services?.first)
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { peripheral.state == .disconnected }
        #expect(peripheral.services == nil)
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("refused") { delegate.events.count == 2 }
        #expect((delegate.lastError as? BluetoothError)?.code == .notConnected)
    }
}
