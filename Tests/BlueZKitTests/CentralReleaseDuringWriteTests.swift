import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// Releasing a `CentralManager` while its writes without response wait for bluetoothd: the
/// closed connection fails what is in flight and what waits, each once, and the manager goes.
/// (Found by the interleaving tester: the failure of a `WriteValue` on the closed connection sent
/// the waiting writes again from its completion, which failed at once, and so on until the
/// stack overflowed.)
@Suite(.timeLimit(.minutes(1))) struct CentralReleaseDuringWriteTests {
    final class Gone<Object: AnyObject>: @unchecked Sendable {
        private let lock = NSLock()
        private weak var object: Object?
        init(_ object: Object) { self.object = object }
        var isGone: Bool { lock.withLock { object == nil } }
    }

    static let commands = BluetoothUUID(0x2A3A)

    /// A sensor whose 2A3A takes writes without response, connected and discovered; bluetoothd
    /// refuses `AcquireWrite`, so that its writes go as `WriteValue` commands.
    static func connected(_ bluez: SimulatedBlueZ) async throws -> (CentralManager, Peripheral, Characteristic) {
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:3A", name: "Commands", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        SimulatedCharacteristic(uuid: "2A3A", flags: ["write-without-response"]),
                        SimulatedCharacteristic(uuid: "2A39", flags: ["write"]),
                    ])
            ])
        try bluez.addPeripheral(sensor)
        bluez.inject(
            .error(name: "org.bluez.Error.NotPermitted", message: "Write acquired (injected)"),
            for: SimulatedMethod(interface: "org.bluez.GattCharacteristic1", member: "AcquireWrite"))
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        try await central.connect(to: peripheral)
        let service = try #require(try await peripheral.discoverServices(matching: [BluetoothUUID(0x180D)]).first)
        let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
        let characteristic = try #require(characteristics.first { $0.uuid == Self.commands })
        return (central, peripheral, characteristic)
    }

    @Test func releasingTheManagerWhileWritesWithoutResponseWaitEndsThem() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let limit = CentralEngine.commandsInFlightLimit
        let manager: Gone<CentralManager>
        let engine: Gone<CentralEngine>
        do {
            let (central, peripheral, characteristic) = try await Self.connected(bluez)
            manager = Gone(central)
            engine = Gone(try #require(peripheral.engine))
            // bluetoothd never answers the WriteValue commands: the first `limit` are in flight,
            // the rest wait in the engine.
            bluez.inject(.noReply, for: .writeValue, count: limit)
            for index in 0..<(limit + 8) {
                peripheral.writeValue(Data([UInt8(index)]), for: characteristic, type: .withoutResponse)
            }
            try await waitUntil("the commands in flight reached bluetoothd") { bluez.unfiredFaultCount == 0 }
            try await waitUntil("the rest wait") { !peripheral.canSendWriteWithoutResponse }
        }
        // The manager goes with its connection: what was in flight fails, what waited ends.
        try await waitUntil("the manager is released") { manager.isGone }
        try await waitUntil("its engine is gone, with nothing left to send") { engine.isGone }
    }

    /// The same with the manager still there (as when the bus goes under it): the writes in flight
    /// fail, those that wait are dropped, and writes made afterwards fail at once, each once.
    @Test func aConnectionClosedUnderWritesWithoutResponseEndsThemOnce() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let limit = CentralEngine.commandsInFlightLimit
        let (central, peripheral, characteristic) = try await Self.connected(bluez)
        let engine = try #require(peripheral.engine)
        bluez.inject(.noReply, for: .writeValue, count: limit)
        for index in 0..<(limit + 8) {
            peripheral.writeValue(Data([UInt8(index)]), for: characteristic, type: .withoutResponse)
        }
        try await waitUntil("the commands in flight reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        try await waitUntil("the rest wait") { !peripheral.canSendWriteWithoutResponse }
        let id = peripheral.deviceID
        let pending = {
            engine.busQueue.sync {
                let model = engine.gatt[id]
                let waiting = model?.writeChannels.values.map(\.waiting.count).reduce(0, +) ?? 0
                return (model?.commandsInFlight ?? 0) + waiting
            }
        }
        #expect(pending() == limit + 8)
        engine.close()
        try await waitUntil("nothing is in flight or waits") { pending() == 0 }
        // Writes after the close fail as they are made.
        for index in 0..<(limit + 8) {
            peripheral.writeValue(Data([UInt8(index)]), for: characteristic, type: .withoutResponse)
        }
        try await waitUntil("the later writes failed too") { pending() == 0 && peripheral.canSendWriteWithoutResponse }
        withExtendedLifetime(central) {}
    }

    /// Writes with response whose results wait on one in flight when the connection closes:
    /// each call ends once, with its own result, and a later write fails as it is made.
    @Test func aConnectionClosedUnderWritesWithResponseFailsEachOnce() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let (central, peripheral, _) = try await Self.connected(bluez)
        let service = try #require(peripheral.services?.first)
        let control = try #require(service.characteristics?.first { $0.uuid == BluetoothUUID(0x2A39) })
        let engine = try #require(peripheral.engine)
        let count = 8
        // bluetoothd never answers the first write; it answers the others.
        bluez.clearFaults()
        bluez.inject(.noReply, for: .writeValue)
        let outcomes = PosixMutex<[Int: Int]>([:])
        for index in 0..<count {
            Task {
                let failed: Bool
                do {
                    try await peripheral.writeValue(Data([UInt8(index)]), to: control)
                    failed = false
                } catch { failed = true }
                outcomes.withLock { $0[index, default: 0] += failed ? 1 : 1000 }
            }
        }
        try await waitUntil("the first write reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        engine.close()
        try await waitUntil("every write ended") { outcomes.withLock { $0.count } == count }
        // A write made after the close fails as it is made.
        await #expect(throws: (any Error).self) { try await peripheral.writeValue(Data([0xFF]), to: control) }
        // Each call ended once, the held write with a failure (the others with theirs, or with
        // success when bluetoothd answered them before the close).
        let ended = outcomes.withLock { $0 }
        #expect(ended.values.allSatisfy { $0 == 1 || $0 == 1000 })
        #expect(ended.values.contains(1))
        withExtendedLifetime(central) {}
    }
}
