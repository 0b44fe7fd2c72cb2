import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// The two programs built from Tests/CoreBluetoothPortIOS, an iOS app's BLE manager with only
/// its import line changed: Swift 6 and Swift 5 language mode.
enum IOSPortProgram: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swift6 = "CoreBluetoothPortIOS"
    case swift5 = "CoreBluetoothPortIOSSwift5"

    var testDescription: String { rawValue }

    /// The lines of `program`'s standard output that start with `prefix`.
    static func lines(_ program: ExampleProgram, _ prefix: String) -> [String] {
        program.output.filter { $0.hasPrefix(prefix) }
    }

    /// Whether `program` printed `first` and later `second`.
    static func printed(_ program: ExampleProgram, _ first: String, before second: String) -> Bool {
        let output = program.output
        guard let a = output.firstIndex(of: first), let b = output.firstIndex(of: second) else { return false }
        return a < b
    }
}

/// Code written as iOS developers write it, run as a program against the simulated bluetoothd:
/// the main queue and the main run loop as on iOS, the app's own descriptions of Core
/// Bluetooth's enums (process-wide, so not in this test bundle), `%@` and `isEqual`, a Timer
/// reading the RSSI, a connection made while the scan runs.
@Suite(.timeLimit(.minutes(2))) struct CoreBluetoothPortIOSTests {
    @Test(arguments: IOSPortProgram.allCases)
    func theAppReadsTheLocationFollowsTheRSSIAndCollectsReadings(_ program: IOSPortProgram) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:34:16", name: "Port iOS HRM", rssi: -58, serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        measurement, SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x02]),
                    ])
            ])
        try bluez.addPeripheral(sensor)
        let app = try ExampleProgram(program.rawValue, [], busAddress: bluez.busAddress)
        try await waitUntil("the app scans") { app.output.contains("Scanning for 180D") }
        sensor.advertise()
        try await waitUntil("the location read and notifications on") {
            app.output.contains("Body sensor location: Wrist") && app.output.contains("Notifications for 2A37: on")
        }
        for bpm: UInt8 in 60..<63 { #expect(sensor.updateValue([0x00, bpm], for: measurement)) }
        // A 16-bit value (flags bit 0): 300 bpm.
        #expect(sensor.updateValue([0x01, 0x2C, 0x01], for: measurement))
        try await waitUntil("4 readings") { IOSPortProgram.lines(app, "Heart rate: ").count == 4 }
        // The Timer fires once a second on the main run loop; each read is answered.
        try await waitUntil("2 RSSI reads") { IOSPortProgram.lines(app, "RSSI: ").count >= 2 }

        #expect(
            IOSPortProgram.lines(app, "Heart rate: ")
                == ["Heart rate: 60 bpm", "Heart rate: 61 bpm", "Heart rate: 62 bpm", "Heart rate: 300 bpm"])
        #expect(IOSPortProgram.lines(app, "RSSI: ").allSatisfy { $0 == "RSSI: -58 dBm" })
        // The app's own description of the state and of the properties, not BlueZKit's.
        #expect(app.output.first == "Central state: On")
        #expect(app.output.contains("Authorization: allowed always"))
        #expect(app.output.contains("Discovered Port iOS HRM at -58 dBm"))
        #expect(app.output.contains("Connecting to Port iOS HRM while scanning: yes"))
        #expect(IOSPortProgram.printed(app, "Connected to Port iOS HRM", before: "Scanning stopped"))
        // %@ with a CBUUID in String(format:) prints the UUID string.
        #expect(app.output.contains("Service 180D"))
        #expect(app.output.contains("Characteristic 2A37: notify"))
        #expect(app.output.contains("Characteristic 2A38: read"))
        #expect(!app.output.contains { $0.hasPrefix("Error") || $0.hasPrefix("Failed") }, "\(app.diagnostics())")
        // NSLog with %@ and a CBPeripheral: its description, on standard error.
        #expect(app.standardError.contains("Connected to Peripheral("), "\(app.diagnostics())")

        // SIGTERM: the app unsubscribes and disconnects, and the program exits.
        #expect(try await app.stop() == 0, "\(app.diagnostics())")
    }
}
