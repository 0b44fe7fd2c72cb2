import BlueZKitTesting
import Foundation
import HeartRateProfile
import TestSupport
import Testing

/// The built example programs against the simulated BlueZ, judged by their `--json` output
/// and by what a simulated central or peripheral sees on the other side.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HeartRateExampleTests {
    static let hrs = "180D"

    /// A simulated heart-rate sensor advertising the Heart Rate service: its measurement
    /// characteristic (notify) first, then `also`.
    static func simulatedSensor(address: String, also: [SimulatedCharacteristic] = [])
        -> (SimulatedPeripheral, measurement: SimulatedCharacteristic)
    {
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let sensor = SimulatedPeripheral(
            address: address, name: "Sim HRM", serviceUUIDs: [hrs],
            services: [SimulatedService(uuid: hrs, characteristics: [measurement] + also)])
        return (sensor, measurement)
    }

    /// The central's human line for a found sensor gives its RSSI in dBm, and says the RSSI is
    /// not available where the controller reported none (Core Bluetooth's 127; btvirt's
    /// controllers in the demo), instead of "127 dBm".
    @Test(arguments: [(Int16(-60), "RSSI -60 dBm"), (Int16(127), "RSSI unavailable")])
    func theCentralSaysWhetherTheRSSIIsKnown(rssi: Int16, said: String) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = Self.simulatedSensor(address: "C0:FF:EE:00:00:07")
        sensor.rssi = rssi
        try bluez.addPeripheral(sensor)
        let program = try ExampleProgram("heart-rate-central", ["--count", "1"], busAddress: bluez.busAddress)
        try await pollUntil("found", diagnostics: program.diagnostics) {
            sensor.advertise()
            return program.output.contains { $0.hasPrefix("Found ") }
        }
        let found = try #require(program.output.first { $0.hasPrefix("Found ") })
        #expect(found.hasSuffix(", " + said), "\(found)")
        _ = try await program.stop()
    }

    @Test func thePeripheralPublishesAdvertisesAndNotifies() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let program = try ExampleProgram(
            "heart-rate-peripheral", ["--json", "--interval-ms", "50", "--name", "Test HRM"],
            busAddress: bluez.busAddress)
        let states = try await program.waitForEvents("state")
        #expect(states.first?["state"] as? String == "poweredOn")
        try await program.waitForEvents("advertising")
        let adapter = try #require(bluez.adapters.first)
        let advertisement = try #require(adapter.registeredAdvertisements.first)
        #expect(advertisement.localName == "Test HRM")
        #expect(
            advertisement.serviceUUIDs.map { $0.uppercased() }.contains { $0.hasPrefix("0000180D") || $0 == "180D" })
        #expect(adapter.registeredApplications.count == 3)

        let central = try bluez.addCentral(address: "11:22:33:44:55:66", mtu: 64)
        #expect(try await central.read(serviceUUID: Self.hrs, characteristicUUID: "2A38") == [0x01])
        #expect(try await central.read(serviceUUID: "180A", characteristicUUID: "2A29") == Array("BlueZKit".utf8))
        let battery = try await central.read(serviceUUID: "180F", characteristicUUID: "2A19")
        #expect(battery.count == 1 && (1...100).contains(battery[0]))

        var values = try await central.subscribe(serviceUUID: Self.hrs, characteristicUUID: "2A37").makeAsyncIterator()
        try await program.waitForEvents("subscribed")
        for _ in 0..<3 {
            let value = try #require(await values.next())
            let measurement = try HeartRateMeasurement(decoding: Data(value))
            #expect((45...190).contains(measurement.beatsPerMinute))
            #expect(measurement.sensorContact == .detected)
            #expect(!measurement.rrIntervals.isEmpty)
        }
        let notified = try await program.waitForEvents("notified", count: 3)
        #expect(notified.allSatisfy { $0["centrals"] as? Int == 1 })

        try await central.write(serviceUUID: Self.hrs, characteristicUUID: "2A39", value: [0x01])
        await #expect(throws: SimulatedATTError(code: 0x80)) {
            try await central.write(serviceUUID: Self.hrs, characteristicUUID: "2A39", value: [0x02])
        }
        let writes = try await program.waitForEvents("controlPoint", count: 2)
        #expect(writes.map { $0["value"] as? [Int] } == [[1], [2]])

        try await central.unsubscribe(serviceUUID: Self.hrs, characteristicUUID: "2A37")
        try await program.waitForEvents("unsubscribed")
        #expect(try await program.stop() == 0)
        #expect(program.events("error").isEmpty, "\(program.diagnostics())")
    }

    @Test func theCentralFindsASensorAndPrintsItsReadings() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurement) = Self.simulatedSensor(
            address: "C0:FF:EE:00:00:01",
            also: [
                SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x02]),
                SimulatedCharacteristic(uuid: "2A39", flags: ["write"]),
            ])
        // A neighbour without the Heart Rate service is not chosen.
        let other = SimulatedPeripheral(address: "C0:FF:EE:00:00:02", name: "Lamp", serviceUUIDs: ["FEAA"])
        try bluez.addPeripheral(other)
        try bluez.addPeripheral(sensor)
        let program = try ExampleProgram(
            "heart-rate-central", ["--json", "--count", "3"], busAddress: bluez.busAddress)
        try await program.waitForEvents("scanning")
        try await pollUntil("the sensor was found", diagnostics: program.diagnostics) {
            other.advertise()
            sensor.advertise()
            return !program.events("discovered").isEmpty
        }
        let discovered = try #require(program.events("discovered").first)
        #expect(discovered["name"] as? String == "Sim HRM")
        try await program.waitForEvents("connected")
        let location = try await program.waitForEvents("sensorLocation")
        #expect(location.first?["value"] as? Int == 2)
        try await pollUntil("subscribed", diagnostics: program.diagnostics) {
            sensor.updateValue([0x16, 72, 0x52, 0x03], for: measurement)  // 72 bpm, contact, RR 850/1024 s
        }
        sensor.updateValue([0x06, 73], for: measurement)
        sensor.updateValue([0x0F, 0x4A, 0x00, 0x0C, 0x00], for: measurement)  // 16-bit 74 bpm, 12 kJ
        let readings = try await program.waitForEvents("heartRate", count: 3)
        #expect(readings.map { $0["bpm"] as? Int } == [72, 73, 74])
        #expect(readings[0]["rrIntervals"] as? [Double] == [850.0 / 1024])
        #expect(readings[2]["energyExpended"] as? Int == 12)
        try await pollUntil("exited after --count readings") { program.status != nil }
        #expect(program.status == 0)
    }

    @Test func theCentralReadsThroughTheNotifySocketWithNotifySockets() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurement) = Self.simulatedSensor(
            address: "C0:FF:EE:00:00:03", also: [SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01])])
        try bluez.addPeripheral(sensor)
        // StartNotify fails: readings can only come through AcquireNotify's socket.
        bluez.inject(.error(name: "org.bluez.Error.Failed", message: "no signals here"), for: .startNotify, count: 5)
        let program = try ExampleProgram(
            "heart-rate-central", ["--json", "--count", "2", "--notify-sockets"], busAddress: bluez.busAddress)
        try await pollUntil("the sensor was found", diagnostics: program.diagnostics) {
            sensor.advertise()
            return !program.events("discovered").isEmpty
        }
        try await pollUntil("subscribed", diagnostics: program.diagnostics) {
            sensor.updateValue([0x06, 81], for: measurement)
        }
        sensor.updateValue([0x06, 82], for: measurement)
        let readings = try await program.waitForEvents("heartRate", count: 2)
        #expect(readings.map { $0["bpm"] as? Int } == [81, 82])
        #expect(bluez.unfiredFaultCount == 5, "StartNotify was called")
        try await pollUntil("exited after --count readings") { program.status != nil }
        #expect(program.status == 0)
    }

    @Test func theCentralWaitsForTheSensorToComeBack() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurement) = Self.simulatedSensor(address: "C0:FF:EE:00:00:01")
        try bluez.addPeripheral(sensor)
        let program = try ExampleProgram("heart-rate-central", ["--json"], busAddress: bluez.busAddress)
        try await pollUntil("connected", diagnostics: program.diagnostics) {
            sensor.advertise()
            return !program.events("connected").isEmpty
        }
        try await pollUntil("subscribed", diagnostics: program.diagnostics) {
            sensor.updateValue([0x00, 70], for: measurement)
        }
        sensor.setInRange(false)
        let disconnected = try await program.waitForEvents("disconnected")
        #expect(disconnected.first?["error"] is String)
        sensor.setInRange(true)
        // Back in range, it advertises (as a real sensor does, over and over) until the central is back.
        try await pollUntil("connected again", diagnostics: program.diagnostics) {
            sensor.advertise()
            return program.events("connected").count >= 2
        }
        // bluetoothd keeps the notify session across the reconnection, so the sensor counts as
        // subscribed before the central has set its characteristics up again: keep measuring.
        try await pollUntil("a reading after the return", diagnostics: program.diagnostics) {
            sensor.updateValue([0x00, 71], for: measurement)
            return program.events("heartRate").contains { $0["bpm"] as? Int == 71 }
        }
        #expect(try await program.stop() == 0)
    }

    @Test func examplesRefuseBadArguments() async throws {
        for (name, arguments) in [
            ("heart-rate-central", ["--count", "zero"]), ("heart-rate-central", ["--id", "not-a-uuid"]),
            ("heart-rate-peripheral", ["--interval-ms"]), ("heart-rate-peripheral", ["--bogus"]),
        ] {
            let program = try ExampleProgram(name, arguments, busAddress: "unix:path=/nonexistent")
            try await pollUntil("\(name) exited") { program.status != nil }
            #expect(program.status == 2, "\(name) \(arguments)")
            #expect(program.standardError.contains("usage:"))
        }
    }
}
