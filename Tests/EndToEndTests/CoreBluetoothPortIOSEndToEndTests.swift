import Foundation
import TestSupport
import Testing

/// In the same serialized suite as the other tests: it uses hci0 and hci1.
extension EndToEndTests {
    /// An iOS app's BLE manager with only its import line changed (Tests/CoreBluetoothPortIOS,
    /// built as a program in each language mode), on the default adapter (hci0), against
    /// heart-rate-peripheral on hci1 through the real bluetoothd: it connects while its scan
    /// runs, reads the location, subscribes, collects readings and follows the RSSI with a Timer.
    @Test(.loadScaledTimeLimit(minutes: 4), arguments: ["CoreBluetoothPortIOS", "CoreBluetoothPortIOSSwift5"])
    func iOSStylePortAgainstTheExamplePeripheral(_ program: String) async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peripheral = try ExampleProgram(
            "heart-rate-peripheral", ["--json", "--adapter", "hci1", "--name", "iOS HRM", "--interval-ms", "300"],
            busAddress: nil)
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        let app = try ExampleProgram(program, [], busAddress: nil)
        let lines: (String) -> [String] = { prefix in app.output.filter { $0.hasPrefix(prefix) } }
        // Connecting while a scan runs took about 10 s in the emulated environment (issue 34 item 8).
        try await pollUntil(
            "the location read and notifications on", timeout: .seconds(90), diagnostics: app.diagnostics
        ) {
            app.output.contains("Body sensor location: Chest") && app.output.contains("Notifications for 2A37: on")
        }
        try await pollUntil("3 readings", timeout: .seconds(30), diagnostics: app.diagnostics) {
            lines("Heart rate: ").count >= 3
        }
        try await pollUntil("2 RSSI reads", timeout: .seconds(30), diagnostics: app.diagnostics) {
            lines("RSSI: ").count >= 2
        }

        #expect(app.output.first == "Central state: On", "the app's own description of CBManagerState")
        #expect(app.output.contains("Authorization: allowed always"))
        #expect(app.output.contains("Connecting to iOS HRM while scanning: yes"))
        #expect(app.output.contains("Service 180D"))
        #expect(app.output.contains("Characteristic 2A37: notify"))
        #expect(app.output.contains("Characteristic 2A38: read"))
        #expect(
            lines("Heart rate: ").allSatisfy { line in
                Int(line.dropFirst("Heart rate: ".count).prefix { $0.isNumber }).map { (45...190).contains($0) }
                    ?? false
            })
        #expect(!app.output.contains { $0.hasPrefix("Error") || $0.hasPrefix("Failed") }, "\(app.diagnostics())")
        #expect(app.standardError.contains("Connected to Peripheral("), "\(app.diagnostics())")
        let subscribed = try await peripheral.waitForEvents("subscribed")
        #expect(subscribed.contains { $0["characteristic"] as? String == "2A37" })

        #expect(try await app.stop() == 0, "\(app.diagnostics())")
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        // The link goes down before the next test.
        try await ExamplePeripheral.forgetKnownDevices()
    }
}
