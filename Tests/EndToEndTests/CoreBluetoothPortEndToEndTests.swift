import BlueZKit
import Dispatch
import Foundation
import TestSupport
import Testing

@testable import CoreBluetoothPort
@testable import CoreBluetoothPortSwift5

/// In the same serialized suite as the other tests: it uses hci0 and hci1.
extension EndToEndTests {
    /// Code written for Apple's Core Bluetooth with only its import line changed: the port's
    /// heart-rate monitor (Swift 6 language mode) on hci0 against the port's heart-rate sensor
    /// (Swift 5 language mode) on hci1, through the real bluetoothd. Their objects are touched on
    /// their managers' queues only.
    @Test(.loadScaledTimeLimit(minutes: 3)) func portedCoreBluetoothCodeTalksThroughBluetoothd() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let sensorQueue = DispatchQueue(label: "e2e.port.sensor")
        let sensor = CoreBluetoothPortSwift5.HeartRateSensor(
            localName: "Port HRM", queue: sensorQueue, options: [BlueZKitOptionAdapterKey: "hci1"])
        try await waitUntil("the sensor advertises", timeout: .seconds(60)) {
            sensorQueue.sync { sensor.log.contains("advertising") }
        }

        let monitorQueue = DispatchQueue(label: "e2e.port.monitor")
        let monitor = CoreBluetoothPort.HeartRateMonitor(
            queue: monitorQueue, options: [BlueZKitOptionAdapterKey: "hci0"])
        defer {
            monitorQueue.sync {
                monitor.centralManager.stopScan()
                if let peripheral = monitor.heartRatePeripheral {
                    monitor.centralManager.cancelPeripheralConnection(peripheral)
                }
            }
            sensorQueue.sync {
                sensor.peripheralManager.stopAdvertising()
                sensor.peripheralManager.removeAllServices()
            }
        }
        try await waitUntil("the location read and notifications on", timeout: .seconds(90)) {
            monitorQueue.sync { monitor.bodySensorLocation != nil && monitor.log.contains("notifying 2A37 true") }
        }
        try await waitUntil("the sensor sees the subscription", timeout: .seconds(30)) {
            sensorQueue.sync { !sensor.subscribedCentrals.isEmpty }
        }
        sensorQueue.sync { for bpm: UInt8 in 70..<75 { sensor.send(heartRate: bpm) } }
        try await waitUntil("5 readings", timeout: .seconds(30)) { monitorQueue.sync { monitor.heartRates.count >= 5 } }
        try await waitUntil("the control point written", timeout: .seconds(30)) {
            monitorQueue.sync { monitor.log.contains("wrote 2A39: ok") }
        }

        monitorQueue.sync {
            #expect(monitor.bodySensorLocation == "Chest")
            #expect(monitor.heartRates.prefix(5) == [70, 71, 72, 73, 74])
            #expect(monitor.log.contains("discovered Port HRM"))
            #expect(monitor.advertisementData[CBAdvertisementDataLocalNameKey] as? String == "Port HRM")
            #expect(monitor.discoveredRSSI != nil)
        }
        sensorQueue.sync {
            #expect(sensor.energyExpendedResets == 1)
            #expect(sensor.log.contains("read 2A38"))
            #expect(sensor.log.contains("subscribed 2A37"))
        }
        // The link goes down before the next test: a released manager does not wait for it.
        let peripheral = try #require(monitorQueue.sync { monitor.heartRatePeripheral })
        monitorQueue.sync { monitor.centralManager.cancelPeripheralConnection(peripheral) }
        try await waitUntil("disconnected", timeout: .seconds(30)) {
            monitorQueue.sync { peripheral.state == .disconnected }
        }
    }
}
