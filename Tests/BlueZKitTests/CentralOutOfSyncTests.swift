import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// ATT's Database Out Of Sync (0x12), as bluetoothd passes it on while a peripheral changes its
/// services: reads and subscriptions are tried again (the change-unaware window closes once
/// bluetoothd confirms the Service Changed indication); writes are not (a retry would reorder
/// them), and a refusal that outlasts the retries reaches the app.
@Suite(.timeLimit(.minutes(5))) struct CentralOutOfSyncTests {
    static let outOfSync = SimulatedFault.error(
        name: "org.bluez.Error.Failed", message: "Operation failed with ATT error: 0x12")

    /// The connected sensor with its Heart Rate characteristics discovered.
    static func discovered() async throws -> (
        CentralFixture, SimulatedPeripheral, Peripheral, RecordingPeripheralDelegate, SimulatedCharacteristic,
        [Characteristic]
    ) {
        let (fixture, sensor, peripheral, delegate, measurement) = try await CentralGATTTests.connectedSensor()
        peripheral.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { delegate.events.count == 1 }
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { delegate.events.count == 2 }
        return (fixture, sensor, peripheral, delegate, measurement, try #require(service.characteristics))
    }

    @Test func aReadRefusedAsOutOfSyncIsTriedAgain() async throws {
        let (fixture, _, peripheral, delegate, _, characteristics) = try await Self.discovered()
        defer { withExtendedLifetime(fixture) {} }
        let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        fixture.bluez.inject(Self.outOfSync, for: .readValue, count: 3)
        peripheral.readValue(for: location)
        try await waitUntil("read") { delegate.events.count == 3 }
        #expect(delegate.events.last == "value 2A38 01", "\(delegate.events)")
        #expect(location.value == Data([0x01]))
    }

    @Test func aSubscriptionRefusedAsOutOfSyncIsTriedAgain() async throws {
        let (fixture, sensor, peripheral, delegate, measurement, characteristics) = try await Self.discovered()
        defer { withExtendedLifetime(fixture) {} }
        let heartRate = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })
        fixture.bluez.inject(Self.outOfSync, for: .startNotify, count: 2)
        peripheral.setNotifyValue(true, for: heartRate)
        try await waitUntil("subscribed") { delegate.events.count == 3 }
        #expect(delegate.events.last == "notifying 2A37 true", "\(delegate.events)")
        #expect(heartRate.isNotifying)
        try await waitUntil("a notification reaches the app") {
            _ = sensor.updateValue([0x00, 72], for: measurement)
            return delegate.events.contains("value 2A37 0048")
        }
    }

    @Test func aRefusalThatOutlastsTheRetriesReachesTheApp() async throws {
        let (fixture, _, peripheral, delegate, _, characteristics) = try await Self.discovered()
        defer { withExtendedLifetime(fixture) {} }
        let location = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        fixture.bluez.inject(Self.outOfSync, for: .readValue, count: 100)
        peripheral.readValue(for: location)
        try await waitUntil("read refused") { delegate.events.count == 3 }
        #expect(delegate.events.last == "value 2A38  error", "no value, then the error")
        let error = try #require(delegate.lastError as? ATTError)
        #expect(error.message.contains("0x12"), "\(error)")
    }

    @Test func aWriteRefusedAsOutOfSyncIsReportedNotRetried() async throws {
        let controlPoint = CentralGATTTests.ControlPoint()
        let (fixture, _, peripheral, delegate, _) = try await CentralGATTTests.connectedSensor(
            controlPoint: controlPoint)
        defer { withExtendedLifetime(fixture) {} }
        peripheral.discoverServices([BluetoothUUID(0x180D)])
        try await waitUntil("services") { delegate.events.count == 1 }
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics([BluetoothUUID(0x2A39)], for: service)
        try await waitUntil("characteristics") { delegate.events.count == 2 }
        let control = try #require(service.characteristics?.first)
        fixture.bluez.inject(Self.outOfSync, for: .writeValue, count: 1)
        peripheral.writeValue(Data([0x01]), for: control, type: .withResponse)
        try await waitUntil("write refused") { delegate.events.count == 3 }
        #expect(delegate.events.last == "wrote 2A39 error")
        #expect(controlPoint.writes.withLock { $0 }.isEmpty, "the write was not sent again")
    }
}
