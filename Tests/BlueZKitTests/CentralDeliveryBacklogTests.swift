import BlueZ
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// What a flooding peer can pile up on a central manager's delegate queue: bounded.
@Suite(.timeLimit(.minutes(1))) struct CentralDeliveryBacklogTests {
    /// Counts the values the peripheral's delegate gets.
    final class Counter: PeripheralDelegate, @unchecked Sendable {
        let values = PosixMutex<[Data]>([])
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            if let value = characteristic.value { values.withLock { $0.append(value) } }
        }
    }

    /// A connected central whose peripheral has `delegate` and is subscribed to the simulated
    /// sensor's heart-rate measurement; the sensor's characteristic to notify from.
    static func subscribed(_ bluez: SimulatedBlueZ, delegate: any PeripheralDelegate) async throws
        -> (CentralManager, CentralAsyncTests.Quiet, SimulatedCharacteristic)
    {
        let (sensor, source) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, quiet, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        try await central.connect(to: peripheral)
        let service = try #require(
            try await peripheral.discoverServices(matching: nil).first { $0.uuid == BluetoothUUID(0x180D) })
        let measurement = try #require(
            try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x2A37)], in: service).first)
        peripheral.delegate = delegate
        peripheral.setNotifyValue(true, for: measurement)
        try await waitUntil("subscribed") { source.isNotifying && measurement.isNotifying }
        return (central, quiet, source)
    }

    /// A peripheral notifies while the delegate queue is stuck: at most 128 values wait, the
    /// oldest are dropped (counted), and the newest one is delivered last.
    @Test func aSlowDelegateKeepsTheNewest128ValuesOfACharacteristic() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let counter = Counter()
        let (central, delegate, source) = try await Self.subscribed(bluez, delegate: counter)
        defer { withExtendedLifetime(central) {} }
        // The delegate queue is stuck until `gate` opens.
        let gate = DispatchSemaphore(value: 0)
        delegate.queue.async { gate.wait() }
        func value(_ index: Int) -> [UInt8] { [UInt8(index & 0xFF), UInt8(index >> 8)] }
        var sent = 0
        for index in 0..<600 where source.notify(value(index)) { sent = index + 1 }
        let limit = CentralDeliveryBacklog.notificationLimit
        try #require(sent > limit)
        try await waitUntil("the flood reached the manager") {
            central.deliveries.dropped.notifications >= sent - limit
        }
        #expect(central.deliveries.count <= limit)
        gate.signal()
        try await waitUntil("the newest delivered") { counter.values.withLock { $0.last } == Data(value(sent - 1)) }
        central.queue.sync {}
        let delivered = counter.values.withLock { $0 }
        #expect(delivered.count <= limit)
        #expect(delivered == (sent - delivered.count..<sent).map { Data(value($0)) }, "the newest, in order")
    }

    /// Records on which thread the delegate gets each value.
    final class ThreadRecorder: PeripheralDelegate, @unchecked Sendable {
        let names = PosixMutex<[String?]>([])
        func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
        {
            // The kernel's name of the thread (Foundation's Thread.name may not be it).
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?
                .trimmingCharacters(in: .newlines)
            names.withLock { $0.append(name) }
        }
    }

    /// A notification reaches the delegate on the thread that read it from the bus, inside the
    /// delegate queue's `sync` (one wake-up per value), not on a worker woken for the queue.
    @Test func aNotificationReachesTheDelegateOnTheThreadThatReadIt() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = ThreadRecorder()
        let (central, _, source) = try await Self.subscribed(bluez, delegate: recorder)
        defer { withExtendedLifetime(central) {} }
        for index in 0..<5 {
            #expect(source.notify([UInt8(index)]))
            try await waitUntil("value \(index) delivered") { recorder.names.withLock { $0.count } == index + 1 }
        }
        #expect(recorder.names.withLock { $0 } == Array(repeating: BlueZClient.busReaderThreadName, count: 5))
    }

    // MARK: The backlog alone

    /// A peripheral to put in entries (the backlog only holds it), and characteristics of it.
    static func parts() async throws -> (SimulatedBlueZ, CentralManager, Peripheral) {
        let bluez = try await SimulatedBlueZ.start()
        let (sensor, _) = CentralAsyncTests.sensor()
        try bluez.addPeripheral(sensor)
        let (central, _, peripheral) = try await CentralAsyncTests.found(bluez, sensor)
        return (bluez, central, peripheral)
    }

    static func characteristic(_ number: Int) throws -> Characteristic {
        let id = try #require(
            BlueZClient.AttributeID(token: "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0010/char00\(number)"))
        return Characteristic(uuid: BluetoothUUID(0x2A37), properties: [.notify], service: nil, id: id)
    }

    @Test func theBacklogAlone() async throws {
        let (bluez, central, peripheral) = try await Self.parts()
        defer { bluez.stop() }
        defer { withExtendedLifetime(central) {} }
        try entriesComeOutInOrderWithOneDrainAtATime(peripheral)
        try onlyTheOldestValueOfTheSameCharacteristicIsDropped(peripheral)
        atMostSixteenDiscoveriesOfAPeripheralWait(peripheral)
        try aLongBacklogIsCompactedAndStaysInOrder(peripheral)
    }

    func entriesComeOutInOrderWithOneDrainAtATime(_ peripheral: Peripheral) throws {
        let backlog = CentralDeliveryBacklog()
        let characteristic = try Self.characteristic(11)
        #expect(backlog.add(.event(.state(.poweredOn))).startDrain)
        #expect(!backlog.add(.notification(Data([1]), characteristic, peripheral)).startDrain)
        #expect(!backlog.add(.event(.state(.poweredOff))).startDrain)
        var taken: [String] = []
        while let entry = backlog.next().entry { taken.append(Self.name(entry)) }
        #expect(taken == ["state poweredOn", "value 01", "state poweredOff"])
        #expect(backlog.add(.event(.state(.poweredOn))).startDrain, "the drain ended: a new one")
    }

    func onlyTheOldestValueOfTheSameCharacteristicIsDropped(_ peripheral: Peripheral) throws {
        let backlog = CentralDeliveryBacklog()
        let first = try Self.characteristic(12)
        let second = try Self.characteristic(13)
        let limit = CentralDeliveryBacklog.notificationLimit
        _ = backlog.add(.notification(Data([0xAA]), second, peripheral))
        _ = backlog.add(.event(.state(.poweredOn)))
        var drops = 0
        for index in 0..<(limit + 3) {
            if backlog.add(.notification(Data([UInt8(index)]), first, peripheral)).firstDrop { drops += 1 }
        }
        #expect(drops == 1, "logged once per burst")
        #expect(backlog.dropped.notifications == 3)
        var taken: [String] = []
        while let entry = backlog.next().entry { taken.append(Self.name(entry)) }
        #expect(taken.prefix(3) == ["value aa", "state poweredOn", "value 03"])
        #expect(taken.count == 2 + limit)
        #expect(taken.last == String(format: "value %02x", limit + 2))
    }

    func atMostSixteenDiscoveriesOfAPeripheralWait(_ peripheral: Peripheral) {
        let backlog = CentralDeliveryBacklog()
        for rssi in 0..<40 {
            _ = backlog.add(.event(.discovered(peripheral, AdvertisementData(), rssi: rssi, name: nil)))
        }
        #expect(backlog.count == CentralDeliveryBacklog.discoveryLimit)
        #expect(backlog.dropped.discoveries == 40 - CentralDeliveryBacklog.discoveryLimit)
        var rssis: [Int] = []
        while let entry = backlog.next().entry {
            if case .event(.discovered(_, _, let rssi, _)) = entry { rssis.append(rssi) }
        }
        #expect(rssis == Array(24..<40))
        #expect(backlog.next().dropped == 0, "reported once, by the drain that emptied the backlog")
    }

    func aLongBacklogIsCompactedAndStaysInOrder(_ peripheral: Peripheral) throws {
        let backlog = CentralDeliveryBacklog()
        let characteristic = try Self.characteristic(14)
        var expected = 0
        for round in 0..<20 {
            for index in 0..<100 {
                _ = backlog.add(.notification(Data([UInt8(index)]), characteristic, peripheral))
            }
            for _ in 0..<(round.isMultiple(of: 2) ? 150 : 50) {
                guard let entry = backlog.next().entry else { break }
                if case .notification = entry { expected += 1 }
            }
        }
        #expect(backlog.count <= CentralDeliveryBacklog.notificationLimit)
        #expect(expected + backlog.count + backlog.dropped.notifications == 2000)
    }

    static func name(_ entry: CentralDeliveryBacklog.Entry) -> String {
        switch entry {
        case .event(.state(let state)): "state \(state)"
        case .event: "event"
        case .notification(let value, _, _): "value " + value.map { String(format: "%02x", $0) }.joined()
        }
    }
}
