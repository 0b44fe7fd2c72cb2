import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import CoreBluetoothPort
@testable import CoreBluetoothPortSwift5

/// The port's heart-rate monitor, from either language mode.
protocol PortMonitor: AnyObject {
    var log: [String] { get }
    var bodySensorLocation: String? { get }
    var heartRates: [Int] { get }
    var advertisementData: [String: Any] { get }
    var discoveredRSSI: NSNumber? { get }
    var readRSSI: NSNumber? { get }
}

/// The port's heart-rate sensor, from either language mode.
protocol PortSensor: AnyObject {
    var log: [String] { get }
    var subscribedCentrals: [CBCentral] { get }
    var pendingUpdates: [Data] { get }
    var energyExpendedResets: Int { get }
    var readyCalls: Int { get }
    var sentCount: Int { get }
    func send(heartRate: UInt8)
}

extension CoreBluetoothPort.HeartRateMonitor: PortMonitor {}
extension CoreBluetoothPortSwift5.HeartRateMonitor: PortMonitor {}
extension CoreBluetoothPort.HeartRateSensor: PortSensor {}
extension CoreBluetoothPortSwift5.HeartRateSensor: PortSensor {}

/// The language mode the port's code was compiled in.
enum PortLanguageMode: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swift6
    case swift5

    var testDescription: String { rawValue }

    func monitor(queue: DispatchQueue, options: [String: Any]) -> any PortMonitor {
        switch self {
        case .swift6: CoreBluetoothPort.HeartRateMonitor(queue: queue, options: options)
        case .swift5: CoreBluetoothPortSwift5.HeartRateMonitor(queue: queue, options: options)
        }
    }

    func sensor(localName: String, queue: DispatchQueue, options: [String: Any]) -> any PortSensor {
        switch self {
        case .swift6: CoreBluetoothPort.HeartRateSensor(localName: localName, queue: queue, options: options)
        case .swift5: CoreBluetoothPortSwift5.HeartRateSensor(localName: localName, queue: queue, options: options)
        }
    }
}

/// Code written for Apple's Core Bluetooth, with only its import line changed, against the
/// simulated BlueZ, in both language modes. Its objects are touched on their manager's queue only.
@Suite(.timeLimit(.minutes(5))) struct CoreBluetoothPortTests {
    @Test(arguments: PortLanguageMode.allCases)
    func theMonitorReadsTheLocationAndReceivesReadings(_ mode: PortLanguageMode) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let controlWrites = PosixMutex<[[UInt8]]>([])
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:16", name: "Port HRM", rssi: -61, txPower: 4, serviceUUIDs: ["180D"],
            manufacturerData: [0x004C: [0x01, 0x02]], serviceData: ["180D": [0x2A]],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        measurement,
                        SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01]),
                        SimulatedCharacteristic(
                            uuid: "2A39", flags: ["write"],
                            onWrite: { request throws(SimulatedATTError) in
                                controlWrites.withLock { $0.append(request.value) }
                            }),
                    ])
            ])
        try bluez.addPeripheral(sensor)
        let queue = DispatchQueue(label: "port.monitor")
        let monitor = mode.monitor(
            queue: queue,
            options: [BlueZKitOptionBusAddressKey: bluez.busAddress, CBCentralManagerOptionShowPowerAlertKey: true])
        try await waitUntil("scanning") { queue.sync { monitor.log.contains("central.state is .poweredOn") } }
        sensor.advertise()
        try await waitUntil("the location read and notifications on") {
            queue.sync { monitor.bodySensorLocation != nil && monitor.log.contains("notifying 2A37 true") }
        }
        for bpm: UInt8 in 60..<65 { #expect(sensor.updateValue([0x00, bpm], for: measurement)) }
        try await waitUntil("5 readings") { queue.sync { monitor.heartRates.count == 5 } }
        try await waitUntil("the control point written and the RSSI read") {
            queue.sync { monitor.log.contains("wrote 2A39: ok") && monitor.readRSSI != nil }
        }

        queue.sync {
            #expect(monitor.bodySensorLocation == "Chest")
            #expect(monitor.heartRates == [60, 61, 62, 63, 64])
            #expect(monitor.log.contains("discovered Port HRM"))
            #expect(monitor.log.contains("connected"))
            // Apple's value types in the advertisement data and the RSSI.
            let data = monitor.advertisementData
            #expect(data[CBAdvertisementDataLocalNameKey] as? String == "Port HRM")
            #expect(data[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] == [CBUUID(string: "180D")])
            #expect(
                data[CBAdvertisementDataServiceDataKey] as? [CBUUID: Data] == [CBUUID(string: "180D"): Data([0x2A])])
            #expect(data[CBAdvertisementDataManufacturerDataKey] as? Data == Data([0x4C, 0x00, 0x01, 0x02]))
            let txPower = data[CBAdvertisementDataTxPowerLevelKey]
            #expect(txPower.map { type(of: $0) is NSNumber.Type } == true, "TxPowerLevel is an NSNumber")
            #expect((txPower as? NSNumber)?.intValue == 4)
            #expect(monitor.discoveredRSSI?.intValue == -61)
            #expect(monitor.readRSSI?.intValue == -61)
        }
        #expect(controlWrites.withLock { $0 } == [[0x01]])
    }

    @Test(arguments: PortLanguageMode.allCases)
    func theSensorServesACentral(_ mode: PortLanguageMode) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let queue = DispatchQueue(label: "port.sensor")
        let sensor = mode.sensor(
            localName: "Port HRM", queue: queue, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("advertising") { queue.sync { sensor.log.contains("advertising") } }
        let advertisement = try #require(bluez.adapters.first?.registeredAdvertisements.first)
        #expect(advertisement.localName == "Port HRM")
        #expect(advertisement.serviceUUIDs == ["0000180d-0000-1000-8000-00805f9b34fb"])

        let central = try bluez.addCentral(address: "11:22:33:44:55:16")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x01])
        try await central.write(serviceUUID: "180D", characteristicUUID: "2A39", value: [0x01])
        await #expect(throws: SimulatedATTError(code: 0x06)) {
            try await central.write(serviceUUID: "180D", characteristicUUID: "2A39", value: [0x07])
        }
        var values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37").makeAsyncIterator()
        try await waitUntil("subscribed") { queue.sync { sensor.subscribedCentrals.count == 1 } }
        queue.sync { for bpm: UInt8 in 70..<75 { sensor.send(heartRate: bpm) } }
        for bpm: UInt8 in 70..<75 { #expect(await values.next() == [0x00, bpm]) }

        // Back-pressure: with the bus stopped updates are refused and wait for
        // peripheralManagerIsReady(toUpdateSubscribers:), then go out in order.
        bluez.pauseBus()
        var attempts = 0
        while queue.sync(execute: { sensor.pendingUpdates.isEmpty }) && attempts < 100_000 {
            queue.sync { sensor.send(heartRate: UInt8(attempts % 200)) }
            attempts += 1
        }
        let total = attempts + 5
        #expect(queue.sync { !sensor.pendingUpdates.isEmpty }, "updateValue never refused")
        queue.sync { for _ in 0..<3 { sensor.send(heartRate: 201) } }
        bluez.resumeBus()
        try await waitUntil("ready, and the waiting readings sent", timeout: .seconds(60)) {
            queue.sync { sensor.readyCalls > 0 && sensor.pendingUpdates.isEmpty }
        }
        #expect(queue.sync { sensor.sentCount } == total + 3)
        var received = 0
        while received < total - 5 + 3, let value = await values.next() {
            let expected: UInt8 = received < total - 5 ? UInt8(received % 200) : 201
            #expect(value == [0x00, expected])
            received += 1
        }
        try await central.unsubscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try await waitUntil("unsubscribed") { queue.sync { sensor.subscribedCentrals.isEmpty } }

        queue.sync {
            #expect(sensor.energyExpendedResets == 1)
            for line in ["added 180D", "read 2A38", "energy expended reset", "refused a control point command"] {
                #expect(sensor.log.contains(line), "\(line)")
            }
            #expect(sensor.log.contains("subscribed 2A37") && sensor.log.contains("unsubscribed 2A37"))
        }
    }
}
