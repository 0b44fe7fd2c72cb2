import BlueZKit
import BlueZKitTesting
import DBus
import Foundation
import Locking
import TestSupport
import Testing

/// Counts `peripheralIsReady(toSendWriteWithoutResponse:)` besides what the recorder logs.
final class WriteReadinessDelegate: PeripheralDelegate, @unchecked Sendable {
    let recorder = RecordingPeripheralDelegate()
    private let readyCount = PosixMutex(0)
    var ready: Int { readyCount.withLock { $0 } }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        recorder.peripheral(peripheral, didUpdateValueFor: characteristic, error: error)
    }
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        recorder.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
    }
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        recorder.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
    }
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        readyCount.withLock { $0 += 1 }
    }
}

/// The socket paths of the central: `AcquireNotify` for notifications, `AcquireWrite` for writes
/// without response, each with its fallback, and the order of writes.
@Suite(.timeLimit(.minutes(5))) struct CentralSocketTests {
    final class Writes: Sendable {
        let received = PosixMutex<[(bytes: [UInt8], kind: SimulatedWriteRequest.Kind)]>([])
        var values: [[UInt8]] { received.withLock { $0.map(\.bytes) } }
    }

    struct Sensor {
        let fixture: CentralFixture
        let simulated: SimulatedPeripheral
        let peripheral: Peripheral
        let delegate: WriteReadinessDelegate
        let measurement: SimulatedCharacteristic
        let alert: SimulatedCharacteristic
        let stream: SimulatedCharacteristic
        let remote: [String: Characteristic]
    }

    /// A sensor with a notify characteristic (2A37), an indicate-only one (2A05), one written
    /// without response (2A06) and one with response (2A39), connected and discovered.
    static func connectedSensor(writes: Writes, usesNotifySockets: Bool = true) async throws -> Sensor {
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let alert = SimulatedCharacteristic(uuid: "2A05", flags: ["indicate"])
        let record: SimulatedCharacteristic.WriteHandler = { request throws(SimulatedATTError) in
            writes.received.withLock { $0.append((request.value, request.kind)) }
        }
        let stream = SimulatedCharacteristic(uuid: "2A06", flags: ["write-without-response"], onWrite: record)
        let control = SimulatedCharacteristic(uuid: "2A39", flags: ["write"], onWrite: record)
        let simulated = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:42", name: "Socket", serviceUUIDs: ["180D"],
            services: [SimulatedService(uuid: "180D", characteristics: [measurement, alert, stream, control])])
        let fixture = try await CentralFixture.make(usesNotifySockets: usesNotifySockets)
        try fixture.bluez.addPeripheral(simulated)
        let peripheral = try await firstDiscovery(
            fixture.central, scanningFor: [BluetoothUUID(0x180D)], advertising: simulated)
        let delegate = WriteReadinessDelegate()
        peripheral.delegate = delegate
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        peripheral.discoverServices(nil)
        try await waitUntil("services") { delegate.recorder.events.count == 0 && peripheral.services != nil }
        let service = try #require(peripheral.services?.first { $0.uuid == BluetoothUUID(0x180D) })
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { service.characteristics?.count == 4 }
        var remote: [String: Characteristic] = [:]
        for characteristic in service.characteristics ?? [] { remote[characteristic.uuid.uuidString] = characteristic }
        return Sensor(
            fixture: fixture, simulated: simulated, peripheral: peripheral, delegate: delegate,
            measurement: measurement, alert: alert, stream: stream, remote: remote)
    }

    @Test func notificationsComeThroughTheAcquiredSocketInOrder() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        try await waitUntil("notify acquired") {
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(true)
        }
        // bluetoothd 5.66 does not turn Notifying on for an acquired session.
        #expect(try await sensor.fixture.characteristicProperty("Notifying", of: sensor.measurement) == .bool(false))
        for beat in 0..<100 { #expect(sensor.measurement.notify([0x00, UInt8(beat)])) }
        try await waitUntil("100 values") { events.events.count == 101 }
        #expect(Array(events.events.dropFirst()) == (0..<100).map { String(format: "value 2A37 00%02x", $0) })
        sensor.peripheral.setNotifyValue(false, for: heartRate)
        try await waitUntil("unsubscribed") { events.events.last == "notifying 2A37 false" }
        try await waitUntil("socket released") {
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(false)
        }
        #expect(!heartRate.isNotifying)
    }

    @Test func anEmptyNotificationIsAValueNotTheEndOfTheSocket() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        try await waitUntil("notify acquired") {
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(true)
        }
        #expect(sensor.measurement.notify([]))
        #expect(sensor.measurement.notify([0x00, 0x50]))
        try await waitUntil("two values") { events.events.count == 3 }
        #expect(Array(events.events.dropFirst()) == ["value 2A37 ", "value 2A37 0050"])
    }

    @Test func aSocketClosedByBluetoothdWhileConnectedGoesOnWithStartNotify() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        try await waitUntil("notify acquired") {
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(true)
        }
        // bluetoothd 5.66 closes an acquired socket on anyone's StopNotify.
        let other = try await DBusConnection.open(address: sensor.fixture.bluez.busAddress)
        defer { other.close() }
        _ = try await other.call(
            destination: "org.bluez", path: try ObjectPath(try #require(sensor.measurement.objectPath)),
            interface: "org.bluez.GattCharacteristic1", member: "StopNotify")
        try await waitUntil("subscribed again with StartNotify") {
            try await sensor.fixture.characteristicProperty("Notifying", of: sensor.measurement) == .bool(true)
        }
        #expect(sensor.measurement.notify([0x00, 0x51]))
        try await waitUntil("a value") { events.events.count == 2 }
        #expect(events.events == ["notifying 2A37 true", "value 2A37 0051"])
        #expect(heartRate.isNotifying)
    }

    @Test func withoutNotifySocketsEveryNotificationIsASignal() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes(), usesNotifySockets: false)
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        #expect(try await sensor.fixture.characteristicProperty("Notifying", of: sensor.measurement) == .bool(true))
        #expect(
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(false))
        #expect(sensor.measurement.notify([0x00, 0x52]))
        try await waitUntil("a value") { events.events.count == 2 }
        #expect(events.events.last == "value 2A37 0052")
    }

    @Test func subscribesWithStartNotifyWhenAcquireNotifyIsRefused() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.fixture.bluez.inject(
            .error(name: "org.bluez.Error.InProgress", message: "In Progress"),
            for: SimulatedMethod(interface: "org.bluez.GattCharacteristic1", member: "AcquireNotify"))
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        #expect(try await sensor.fixture.characteristicProperty("Notifying", of: sensor.measurement) == .bool(true))
        #expect(
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(false))
        for beat in [70, 71] as [UInt8] { #expect(sensor.measurement.notify([0x00, beat])) }
        try await waitUntil("two values") { events.events.count == 3 }
        #expect(Array(events.events.dropFirst()) == ["value 2A37 0046", "value 2A37 0047"])
    }

    @Test func indicationsUseStartNotify() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let alert = try #require(sensor.remote["2A05"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: alert)
        try await waitUntil("subscribed") { events.events == ["notifying 2A05 true"] }
        #expect(sensor.alert.isNotifying)
        #expect(sensor.alert.notify([0x01, 0x02]))
        try await waitUntil("indicated") { events.events.last == "value 2A05 0102" }
    }

    @Test func aLinkThatDropsEndsTheSocketWithoutAStateCallback() async throws {
        let sensor = try await Self.connectedSensor(writes: Writes())
        let heartRate = try #require(sensor.remote["2A37"])
        let events = sensor.delegate.recorder
        sensor.peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { events.events == ["notifying 2A37 true"] }
        try await waitUntil("notify acquired") {
            try await sensor.fixture.characteristicProperty("NotifyAcquired", of: sensor.measurement) == .bool(true)
        }
        sensor.simulated.dropConnection()
        try await waitUntil("disconnected") { sensor.peripheral.state == .disconnected }
        // A round trip to the manager's queue: anything the socket's end caused is delivered by now.
        try await waitUntil("quiet") { sensor.fixture.central.queue.sync { true } }
        #expect(events.events == ["notifying 2A37 true"])
    }

    @Test func writesWithoutResponseGoThroughTheAcquiredSocketInOrder() async throws {
        let writes = Writes()
        let sensor = try await Self.connectedSensor(writes: writes)
        let stream = try #require(sensor.remote["2A06"])
        let expected = (0..<300).map { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        for bytes in expected { sensor.peripheral.writeValue(Data(bytes), for: stream, type: .withoutResponse) }
        try await waitUntil("300 writes") { writes.values.count == 300 }
        #expect(writes.values == expected)
        #expect(writes.received.withLock { $0.allSatisfy { $0.kind == .command } })
        #expect(try await sensor.fixture.characteristicProperty("WriteAcquired", of: sensor.stream) == .bool(true))
        #expect(sensor.peripheral.canSendWriteWithoutResponse)
        #expect(sensor.delegate.recorder.events.isEmpty)
    }

    @Test func anEmptyWriteWithoutResponseDoesNotStopTheSocket() async throws {
        let writes = Writes()
        let sensor = try await Self.connectedSensor(writes: writes)
        let stream = try #require(sensor.remote["2A06"])
        sensor.peripheral.writeValue(Data([0x01]), for: stream, type: .withoutResponse)
        try await waitUntil("first write") { writes.values.count == 1 }
        #expect(try await sensor.fixture.characteristicProperty("WriteAcquired", of: sensor.stream) == .bool(true))
        // As bluetoothd 5.66, the simulator stops reading a write socket after an empty datagram,
        // and refuses WriteValue while the socket is held: the empty write is not sent, and the
        // writes after it still arrive.
        sensor.peripheral.writeValue(Data(), for: stream, type: .withoutResponse)
        sensor.peripheral.writeValue(Data([0x02]), for: stream, type: .withoutResponse)
        try await waitUntil("the write after the empty one") { writes.values.count == 2 }
        #expect(writes.values == [[0x01], [0x02]])
    }

    @Test func writesWithoutResponseQueueInOrderWhenCommandsMustWait() async throws {
        let writes = Writes()
        let sensor = try await Self.connectedSensor(writes: writes)
        let stream = try #require(sensor.remote["2A06"])
        sensor.fixture.bluez.inject(
            .error(name: "org.bluez.Error.NotSupported", message: "Operation is not supported"),
            for: SimulatedMethod(interface: "org.bluez.GattCharacteristic1", member: "AcquireWrite"))
        let expected = (0..<100).map { [UInt8($0)] }
        // All at once, on the manager's queue: more than the limit of commands in flight.
        sensor.fixture.central.queue.sync {
            for bytes in expected { sensor.peripheral.writeValue(Data(bytes), for: stream, type: .withoutResponse) }
        }
        try await waitUntil("100 writes") { writes.values.count == 100 }
        #expect(writes.values == expected)
        try await waitUntil("ready again") {
            sensor.delegate.ready >= 1 && sensor.peripheral.canSendWriteWithoutResponse
        }
    }

    @Test func writesWithResponseReachThePeripheralInTheOrderMade() async throws {
        let writes = Writes()
        let sensor = try await Self.connectedSensor(writes: writes)
        let control = try #require(sensor.remote["2A39"])
        let expected = (0..<60).map { [UInt8($0)] }
        for bytes in expected { sensor.peripheral.writeValue(Data(bytes), for: control, type: .withResponse) }
        try await waitUntil("60 answers") { sensor.delegate.recorder.events.count == 60 }
        #expect(writes.values == expected)
        #expect(writes.received.withLock { $0.allSatisfy { $0.kind == .request } })
        #expect(sensor.delegate.recorder.events.allSatisfy { $0 == "wrote 2A39" })
    }
}

extension CentralFixture {
    /// A property of a simulated characteristic's `GattCharacteristic1` object, read over the bus.
    func characteristicProperty(_ name: String, of characteristic: SimulatedCharacteristic) async throws -> DBusValue? {
        let path = try ObjectPath(try #require(characteristic.objectPath))
        let connection = try await DBusConnection.open(address: bluez.busAddress)
        defer { connection.close() }
        let reply = try await connection.call(
            destination: "org.bluez", path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
            arguments: [.string("org.bluez.GattCharacteristic1"), .string(name)])
        return reply.first?.unwrappingVariants
    }
}
