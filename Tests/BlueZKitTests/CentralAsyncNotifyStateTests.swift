import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// `setNotifyValue(_:of:)`: it returns once the subscription changed (the characteristic says
/// so), throws the refusal, and throws when the link ends while the change is under way.
@Suite(.timeLimit(.minutes(1))) struct CentralAsyncNotifyStateTests {
    @Test func subscribesAndUnsubscribesAndThrowsARefusal() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, source) = CentralAsyncTests.sensor()
        let (central, _, peripheral, service) = try await CentralAsyncTests.connected(
            bluez, sensor, service: BluetoothUUID(0x180D))
        defer { withExtendedLifetime(central) {} }
        let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
        let measurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })

        try await peripheral.setNotifyValue(true, of: measurement)
        #expect(measurement.isNotifying)
        #expect(source.isNotifying)
        try await peripheral.setNotifyValue(false, of: measurement)
        #expect(!measurement.isNotifying)
        #expect(!source.isNotifying)

        bluez.inject(.error(name: "org.bluez.Error.NotPermitted", message: "Write not permitted"), for: .startNotify)
        await #expect(throws: (any Error).self) { try await peripheral.setNotifyValue(true, of: measurement) }
        #expect(!measurement.isNotifying)
    }

    @Test func theLinkEndingWhileTheSubscriptionIsUnderWayEndsTheCall() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (sensor, _) = CentralAsyncTests.sensor()
        let (central, _, peripheral, service) = try await CentralAsyncTests.connected(
            bluez, sensor, service: BluetoothUUID(0x180D))
        defer { withExtendedLifetime(central) {} }
        let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
        let measurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })

        // bluetoothd never answers StartNotify: the link ends while the call waits.
        bluez.inject(.noReply, for: .startNotify)
        let ending = Ending()
        Task {
            do {
                try await peripheral.setNotifyValue(true, of: measurement)
                ending.end("returned")
            } catch { ending.end("threw \(type(of: error))") }
        }
        try await waitUntil("StartNotify reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        sensor.dropConnection()
        try await waitUntil("the call ended") { ending.how != nil }
        #expect(ending.how == "threw BluetoothError")
    }

    typealias Ending = StreamsEndWithTheirManagerTests.Ending
}
