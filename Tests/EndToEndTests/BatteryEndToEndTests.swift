import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// `Peripheral.batteryLevel` from the real bluetoothd's battery plugin, against BlueZ's own
/// `example-gatt-server` (its Battery Level starts at 100 and falls by 2 every 5 s while notified).
/// In the serialized end-to-end suite.
extension EndToEndTests {
    /// Records battery levels as the delegate hears of them.
    final class BatteryRecorder: PeripheralDelegate, @unchecked Sendable {
        private let log = Mutex<[String]>([])
        var events: [String] { log.withLock { $0 } }
        func count(_ prefix: String) -> Int { events.filter { $0.hasPrefix(prefix) }.count }
        func peripheral(_ peripheral: Peripheral, didUpdateBatteryLevel level: Int?) {
            let held =
                peripheral.batteryLevel == level ? "" : " (property \(String(describing: peripheral.batteryLevel)))"
            log.withLock { $0.append("battery \(level.map(String.init) ?? "nil")\(held)") }
        }
        func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
            log.withLock { $0.append("services") }
        }
    }

    @Test(.loadScaledTimeLimit(minutes: 3)) func theBatteryLevelOfBlueZsExampleGattServer() async throws {
        let session = try await ExampleGattServerSession.start()
        defer { session.example.stop() }
        let (central, sensor) = (session.central, session.sensor)
        let recorder = BatteryRecorder()
        sensor.delegate = recorder
        #expect(sensor.batteryLevel == nil)
        central.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }

        // bluetoothd reads the level and subscribes by itself, with no call of ours.
        try await waitUntil("the first battery level", timeout: .seconds(60)) { recorder.count("battery") >= 1 }
        let first = try #require(sensor.batteryLevel)
        #expect((0...100).contains(first))
        #expect(recorder.events.first == "battery \(first)")
        // example-gatt-server lowers it while notified, every 5 s.
        try await waitUntil("a notified battery level", timeout: .seconds(30)) { recorder.count("battery") >= 2 }
        let second = try #require(sensor.batteryLevel)
        #expect(second < first)
        #expect(recorder.events.allSatisfy { !$0.contains("property") }, "\(recorder.events)")

        // The Battery service is among the services (exported read-only from bluetoothd 5.80).
        sensor.discoverServices(nil)
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        #expect(sensor.services?.contains { $0.uuid == BluetoothUUID(0x180F) } == true)
        print("services of example-gatt-server: \((sensor.services ?? []).map(\.uuid.uuidString))")

        central.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        try await waitUntil("the level is unknown again", timeout: .seconds(30)) { sensor.batteryLevel == nil }
        #expect(recorder.events.last == "battery nil")
        print("battery levels: \(recorder.events)")
    }
}
