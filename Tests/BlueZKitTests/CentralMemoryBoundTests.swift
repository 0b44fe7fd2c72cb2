import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

@testable import BlueZKit

/// Memory that a long connection or scan could grow without end: async streams nobody reads,
/// and the attributes of invalidated services.
@Suite(.timeLimit(.minutes(5))) struct CentralMemoryBoundTests {
    /// A scan with duplicates and a stream its consumer does not read: the stream keeps the
    /// newest values only.
    @Test func anUnreadDiscoveryStreamKeepsTheNewest() async throws {
        let fixture = try await CentralFixture.make()
        defer { withExtendedLifetime(fixture) {} }
        let sensor = SimulatedPeripheral(address: "C0:FF:EE:00:03:01", name: "Busy", serviceUUIDs: ["180D"])
        try fixture.bluez.addPeripheral(sensor)
        let stream = fixture.central.discoveries()
        fixture.central.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))
        try await waitUntil("scanning") { fixture.central.isScanning }
        let total = CentralManager.streamBufferLimit + 44
        func marker(_ index: Int) -> Data { Data([0xFF, 0xFF, UInt8(index & 0xFF), UInt8(index >> 8)]) }
        for index in 0..<total {
            // One at a time: advertisements in one burst may reach the app as one report.
            sensor.manufacturerData = [0xFFFF: [UInt8(index & 0xFF), UInt8(index >> 8)]]
            sensor.advertise()
            try await waitUntil("advertisement \(index) reported") {
                fixture.delegate.discoveries(named: "Busy").last?.data.manufacturerData == marker(index)
            }
        }
        let last = marker(total - 1)
        #expect(fixture.delegate.discoveries(named: "Busy").count == total)
        var buffered = 0
        for await discovery in stream {
            buffered += 1
            if discovery.advertisementData.manufacturerData == last { break }
        }
        #expect(buffered == CentralManager.streamBufferLimit)
    }

    @Test func anUnreadNotificationStreamKeepsTheNewest() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, measurementSource) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        defer { withExtendedLifetime(central) {} }
        try await central.connect(to: peripheral)
        let service = try #require(
            try await peripheral.discoverServices(matching: nil).first { $0.uuid == BluetoothUUID(0x180D) })
        let measurement = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x2A37)], in: service).first)
        let stream = peripheral.notifications(of: measurement)
        try await waitUntil("subscribed") { measurementSource.isNotifying }
        let total = CentralManager.streamBufferLimit + 44
        func value(_ index: Int) -> Data { Data([UInt8(index & 0xFF), UInt8(index >> 8)]) }
        for index in 0..<total {
            // One at a time: a burst can outrun the simulated link's socket under load.
            #expect(measurementSource.notify(Array(value(index))))
            try await waitUntil("value \(index) delivered") { measurement.value == value(index) }
        }
        // The value is set right before the stream gets it, in the same block on the manager's
        // queue: let that block finish, or the last value could arrive while the loop reads.
        central.queue.sync {}
        let last = value(total - 1)
        var buffered = 0
        for try await value in stream {
            buffered += 1
            if value == last { break }
        }
        #expect(buffered == CentralManager.streamBufferLimit)
    }

    /// Services that change again and again while connected: the engine keeps only the
    /// invalidated attributes the app can still hold, not one more per change.
    @Test func invalidatedAttributesDoNotAccumulate() async throws {
        let rig = try await CentralServiceChangeTests.connect()
        defer { withExtendedLifetime(rig.fixture) {} }
        let engine = try #require(rig.fixture.central.shared.withLock { $0.engine })
        let changes = 10
        for change in 1...changes {
            let (old, new) = change.isMultiple(of: 2) ? ("181A", "180F") : ("180F", "181A")
            try rig.sensor.replaceService(uuid: old, with: SimulatedService(uuid: new))
            try await waitUntil("modified") { rig.delegate.modifications.count == change }
            rig.peripheral.discoverServices(nil)
            try await waitUntil("rediscovered") {
                rig.peripheral.services?.contains { $0.uuid.uuidString == new } == true
            }
        }
        #expect(engine.invalidatedAttributeCount(of: rig.peripheral) <= 1)
        // One the app holds is kept, and still refused.
        let held = try #require(rig.peripheral.services?.first { $0.uuid.uuidString == "180F" })
        try rig.sensor.replaceService(uuid: "180F", with: SimulatedService(uuid: "181A"))
        try await waitUntil("modified") { rig.delegate.modifications.count == changes + 1 }
        #expect(engine.invalidatedAttributeCount(of: rig.peripheral) >= 1)
        withExtendedLifetime(held) {}
    }
}
