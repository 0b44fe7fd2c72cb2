import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

/// `Peripheral.batteryLevel` and `peripheral(_:didUpdateBatteryLevel:)` from bluetoothd's
/// `Battery1`, which the simulator exports as bluetoothd's battery plugin does.
@Suite(.timeLimit(.minutes(5))) struct CentralBatteryTests {
    /// Records battery levels and notifications, in order.
    final class BatteryRecorder: PeripheralDelegate, @unchecked Sendable {
        private let log = PosixMutex<[String]>([])
        var events: [String] { log.withLock { $0 } }
        func count(_ prefix: String) -> Int { events.filter { $0.hasPrefix(prefix) }.count }

        func peripheral(_ peripheral: Peripheral, didUpdateBatteryLevel level: Int?) {
            // The property holds the new level when the delegate hears of it.
            let held =
                peripheral.batteryLevel == level ? "" : " (property \(String(describing: peripheral.batteryLevel)))"
            log.withLock { $0.append("battery \(level.map(String.init) ?? "nil")\(held)") }
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
            log.withLock {
                $0.append("services " + (peripheral.services ?? []).map(\.uuid.uuidString).joined(separator: ","))
            }
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
            log.withLock { $0.append("characteristics \(service.uuid)") }
        }
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            let hex = (characteristic.value ?? Data()).map { String(format: "%02x", $0) }.joined()
            log.withLock { $0.append("value \(characteristic.uuid) \(hex)") }
        }
        func peripheral(
            _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
        ) {
            log.withLock { $0.append("notifying \(characteristic.uuid) \(characteristic.isNotifying)") }
        }
    }

    /// A sensor with Heart Rate and a Battery service whose level (`2A19`) has `flags`, connected.
    private static func connected(
        level: [UInt8] = [87], flags: [String] = ["read", "notify"], version: SimulatedBlueZ.Version = .bluez5_66
    ) async throws -> (CentralFixture, SimulatedPeripheral, SimulatedCharacteristic, Peripheral, BatteryRecorder) {
        let battery = SimulatedCharacteristic(uuid: "2A19", flags: flags, value: level)
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:0B:01", name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])]),
                SimulatedService(uuid: "180F", characteristics: [battery]),
            ])
        let fixture = try await CentralFixture.make(options: .init(version: version))
        try fixture.bluez.addPeripheral(sensor)
        fixture.central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        fixture.central.stopScan()
        let peripheral = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral
        let recorder = BatteryRecorder()
        peripheral.delegate = recorder
        #expect(peripheral.batteryLevel == nil)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        return (fixture, sensor, battery, peripheral, recorder)
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func theLevelIsReadThenFollowsNotificationsUntilTheLinkEnds(_ version: SimulatedBlueZ.Version) async throws {
        let (fixture, sensor, battery, peripheral, recorder) = try await Self.connected(version: version)
        defer { withExtendedLifetime(fixture) {} }
        try await waitUntil("the first level") { recorder.count("battery") == 1 }
        #expect(recorder.events == ["battery 87"])
        #expect(peripheral.batteryLevel == 87)
        // bluetoothd's plugin subscribed by itself: the peripheral saw the CCC write.
        #expect(battery.isNotifying)

        #expect(sensor.updateValue([55], for: battery))
        try await waitUntil("the notified level") { recorder.count("battery") == 2 }
        // A level over 100 is no level (src/battery.c refuses it); an equal one changes nothing.
        #expect(sensor.updateValue([101], for: battery))
        #expect(sensor.updateValue([55], for: battery))
        #expect(sensor.updateValue([54], for: battery))
        try await waitUntil("the next level") { recorder.count("battery") == 3 }
        #expect(recorder.events == ["battery 87", "battery 55", "battery 54"])
        #expect(peripheral.batteryLevel == 54)

        sensor.dropConnection()
        try await waitUntil("the level is unknown again") { recorder.count("battery") == 4 }
        #expect(recorder.events.last == "battery nil")
        #expect(peripheral.batteryLevel == nil)
        #expect(peripheral.state == .disconnected)

        // A new link reads the level again.
        fixture.central.connect(peripheral)
        try await waitUntil("the level on the new link") { recorder.count("battery") == 5 }
        #expect(recorder.events.last == "battery 54")
    }

    @Test func theAppsOwnSubscriptionAndThePluginsAreSeparate() async throws {
        let (fixture, sensor, battery, peripheral, recorder) = try await Self.connected()
        defer { withExtendedLifetime(fixture) {} }
        try await waitUntil("the first level") { recorder.count("battery") == 1 }
        // The plugin's notifications are not the app's: no value reaches the app unasked.
        #expect(sensor.updateValue([80], for: battery))
        try await waitUntil("the level") { peripheral.batteryLevel == 80 }
        #expect(recorder.count("value") == 0)

        // The Battery service stays among the services (5.66 exports it; 5.80+ read-only).
        peripheral.discoverServices(nil)
        try await waitUntil("services") { recorder.count("services") == 1 }
        #expect(peripheral.services?.map(\.uuid).contains(BluetoothUUID(0x180F)) == true)
        let service = try #require(peripheral.services?.first { $0.uuid == BluetoothUUID(0x180F) })
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let level = try #require(service.characteristics?.first)
        peripheral.setNotifyValue(true, for: level)
        try await waitUntil("notifying") { recorder.events.contains("notifying 2A19 true") }
        #expect(sensor.updateValue([79], for: battery))
        try await waitUntil("the app's value and the level") {
            recorder.events.contains("value 2A19 4f") && peripheral.batteryLevel == 79
        }
        // The app's unsubscription leaves the plugin's: the level still follows.
        peripheral.setNotifyValue(false, for: level)
        try await waitUntil("not notifying") { recorder.events.contains("notifying 2A19 false") }
        #expect(battery.isNotifying)
        #expect(sensor.updateValue([78], for: battery))
        try await waitUntil("the level after the app unsubscribed") { peripheral.batteryLevel == 78 }
        #expect(recorder.count("value 2A19") == 1)
    }

    @Test(arguments: [(["read"], [UInt8]([70])), (["read", "notify"], []), (["notify"], [70])])
    func noLevelWithoutAReadableNotifyingBatteryLevel(flags: [String], value: [UInt8]) async throws {
        let (fixture, _, battery, peripheral, recorder) = try await Self.connected(level: value, flags: flags)
        defer { withExtendedLifetime(fixture) {} }
        // Service discovery answers after the plugin's read (the link's first turns).
        peripheral.discoverServices(nil)
        try await waitUntil("services") { recorder.count("services") == 1 }
        #expect(peripheral.batteryLevel == nil)
        #expect(recorder.count("battery") == 0)
        #expect(!battery.isNotifying)
    }

    @Test func aLevelOverAHundredReadFirstIsNoLevelUntilAValidOneIsNotified() async throws {
        let (fixture, sensor, battery, peripheral, recorder) = try await Self.connected(level: [200])
        defer { withExtendedLifetime(fixture) {} }
        try await waitUntil("subscribed by bluetoothd") { battery.isNotifying }
        #expect(peripheral.batteryLevel == nil)
        #expect(sensor.updateValue([12], for: battery))
        try await waitUntil("a valid level") { recorder.count("battery") == 1 }
        #expect(recorder.events == ["battery 12"])
    }

    @Test func bluetoothdRestartingMakesTheLevelUnknown() async throws {
        let (fixture, _, _, peripheral, recorder) = try await Self.connected()
        defer { withExtendedLifetime(fixture) {} }
        try await waitUntil("the first level") { recorder.count("battery") == 1 }
        try await fixture.bluez.restart()
        try await waitUntil("the level is unknown") { recorder.count("battery") == 2 }
        #expect(recorder.events == ["battery 87", "battery nil"])
        #expect(peripheral.batteryLevel == nil)
    }
}
