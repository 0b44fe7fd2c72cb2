import BlueZKit
import Foundation

/// A heart-rate client written as an iOS developer writes one: finds a sensor, reads where it is
/// worn, resets its energy expended and prints every reading.
class HeartRateMonitor: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate {
    var centralManager: CBCentralManager!
    var heartRatePeripheral: CBPeripheral!

    // What it saw, for the tests (read on the manager's queue).
    var log: [String] = []
    var bodySensorLocation: String?
    var heartRates: [Int] = []
    var advertisementData: [String: Any] = [:]
    var discoveredRSSI: NSNumber?
    var readRSSI: NSNumber?
    var lastError: Error?

    init(queue: DispatchQueue?, options: [String: Any]?) {
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: options)
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        switch central.state {
        case .unknown: log.append("central.state is .unknown")
        case .resetting: log.append("central.state is .resetting")
        case .unsupported: log.append("central.state is .unsupported")
        case .unauthorized: log.append("central.state is .unauthorized")
        case .poweredOff: log.append("central.state is .poweredOff")
        case .poweredOn:
            log.append("central.state is .poweredOn")
            centralManager.scanForPeripherals(
                withServices: [heartRateServiceCBUUID],
                options: [CBCentralManagerScanOptionAllowDuplicatesKey: NSNumber(value: false)])
        @unknown default: log.append("central.state is unknown to this app")
        }
    }

    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) {
        log.append("discovered \(peripheral.name ?? "?")")
        self.advertisementData = advertisementData
        discoveredRSSI = RSSI
        heartRatePeripheral = peripheral
        heartRatePeripheral.delegate = self
        centralManager.stopScan()
        centralManager.connect(heartRatePeripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        log.append("connected")
        heartRatePeripheral.discoverServices([heartRateServiceCBUUID])
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        log.append("failed to connect: \(describe(error))")
    }

    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?
    ) {
        log.append("disconnected: \(describe(error))")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let services = peripheral.services else { return }
        for service in services {
            log.append("service \(service.uuid)")
            peripheral.discoverCharacteristics(nil, for: service)
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristics = service.characteristics else { return }
        for characteristic in characteristics {
            if characteristic.properties.contains(.read) {
                peripheral.readValue(for: characteristic)
            }
            if characteristic.properties.contains(.notify) {
                peripheral.setNotifyValue(true, for: characteristic)
            }
            if characteristic.uuid == heartRateControlPointCharacteristicCBUUID {
                peripheral.writeValue(Data([0x01]), for: characteristic, type: .withResponse)
            }
        }
        peripheral.readRSSI()
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        if let error {
            log.append("read \(characteristic.uuid) failed: \(describe(error))")
            return
        }
        switch characteristic.uuid {
        case bodySensorLocationCharacteristicCBUUID:
            let location = bodyLocation(from: characteristic)
            bodySensorLocation = location
            log.append("location \(location)")
        case heartRateMeasurementCharacteristicCBUUID:
            heartRates.append(heartRate(from: characteristic))
        default:
            log.append("unhandled characteristic \(characteristic.uuid)")
        }
    }

    func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?
    ) {
        log.append("notifying \(characteristic.uuid) \(characteristic.isNotifying)")
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        log.append("wrote \(characteristic.uuid): \(describe(error))")
    }

    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) {
        readRSSI = RSSI
        log.append("rssi read")
    }

    private func bodyLocation(from characteristic: CBCharacteristic) -> String {
        guard let characteristicData = characteristic.value,
            let byte = characteristicData.first
        else { return "Error" }
        switch byte {
        case 0: return "Other"
        case 1: return "Chest"
        case 2: return "Wrist"
        case 3: return "Finger"
        case 4: return "Hand"
        case 5: return "Ear Lobe"
        case 6: return "Foot"
        default: return "Reserved for future use"
        }
    }

    private func heartRate(from characteristic: CBCharacteristic) -> Int {
        let characteristicData = characteristic.value!
        let byteArray = [UInt8](characteristicData)
        // The heart rate value is one byte or two (little-endian), as bit 0 of the flags says.
        let firstBitValue = byteArray[0] & 0x01
        if firstBitValue == 0 {
            return Int(byteArray[1])
        } else {
            return (Int(byteArray[1]) << 8) + Int(byteArray[2])
        }
    }

    private func describe(_ error: Error?) -> String {
        guard let error else { return "ok" }
        do {
            throw error
        } catch let error as CBATTError {
            return "ATT error \(error.code.rawValue)"
        } catch let error as CBError {
            switch error.code {
            case .peripheralDisconnected: return "peripheral disconnected"
            case .connectionTimeout: return "connection timed out"
            default: return "error \(error.code.rawValue)"
            }
        } catch {
            return error.localizedDescription
        }
    }
}
