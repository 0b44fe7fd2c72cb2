// An iOS app's Bluetooth manager, as iOS developers write one: an NSObject delegate on the main
// queue, %@ logging, isEqual, a Timer that reads the RSSI, a connection made while the scan
// still runs, and an authorization check. The only change for Linux is the import line
// (BlueZKit instead of CoreBluetooth). This directory is compiled twice, as two programs:
// in Swift 6 language mode (CoreBluetoothPortIOS) and in Swift 5 language mode
// (CoreBluetoothPortIOSSwift5, a symbolic link to it).
import BlueZKit

let heartRateServiceUUID = CBUUID(string: "180D")
let heartRateMeasurementUUID = CBUUID(string: "2A37")
let bodySensorLocationUUID = CBUUID(string: "2A38")

class BLEManager: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate {
    var centralManager: CBCentralManager!
    var discoveredPeripheral: CBPeripheral?
    var heartRateMeasurement: CBCharacteristic?
    var rssiTimer: Timer?
    var heartRates: [Int] = []

    override init() {
        super.init()
        centralManager = CBCentralManager(
            delegate: self, queue: nil, options: [CBCentralManagerOptionShowPowerAlertKey: true])
    }

    // MARK: - CBCentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        print("Central state: \(central.state)")
        switch central.state {
        case .poweredOn:
            // Only the system can say yes; on iOS 13 and later ask it before scanning.
            guard CBManager.authorization == .allowedAlways else {
                print("Bluetooth is not allowed for this app")
                return
            }
            print(String(format: "Authorization: %@", describe(central.authorization)))
            startScanning()
        case .poweredOff:
            print("Bluetooth is off")
            cleanup()
        case .unauthorized:
            if #available(iOS 13.0, *) {
                switch central.authorization {
                case .denied: print("You denied Bluetooth to this app")
                case .restricted: print("Bluetooth is restricted on this device")
                default: print("Unexpected authorization")
                }
            }
        case .resetting, .unknown, .unsupported:
            print("Bluetooth is not available")
        @unknown default:
            print("A new central state")
        }
    }

    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) {
        guard let connectable = advertisementData[CBAdvertisementDataIsConnectable] as? NSNumber,
            connectable.boolValue
        else {
            print("Ignoring a peripheral that does not take connections")
            return
        }
        let name = advertisementData[CBAdvertisementDataLocalNameKey] as? String ?? peripheral.name ?? "Unknown"
        print(String(format: "Discovered %@ at %d dBm", name, RSSI.intValue))
        guard !peripheral.isEqual(discoveredPeripheral) else { return }
        // Keep a reference, or the peripheral goes away; connect at once, the scan goes on.
        discoveredPeripheral = peripheral
        print(String(format: "Connecting to %@ while scanning: %@", name, central.isScanning ? "yes" : "no"))
        centralManager.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        print(String(format: "Failed to connect to %@: %@", peripheral, error?.localizedDescription ?? "no error"))
        cleanup()
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        NSLog("Connected to %@", peripheral)
        print(String(format: "Connected to %@", peripheral.name ?? "Unknown"))
        centralManager.stopScan()
        print("Scanning stopped")
        peripheral.delegate = self
        peripheral.discoverServices([heartRateServiceUUID])
        startReadingRSSI(of: peripheral)
    }

    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?
    ) {
        print(String(format: "Disconnected from %@", peripheral.name ?? "Unknown"))
        rssiTimer?.invalidate()
        rssiTimer = nil
        discoveredPeripheral = nil
        heartRateMeasurement = nil
    }

    // MARK: - CBPeripheralDelegate

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        if let error = error {
            print("Error discovering services: \(error.localizedDescription)")
            cleanup()
            return
        }
        guard let services = peripheral.services else { return }
        for service in services where service.uuid.isEqual(heartRateServiceUUID) {
            print(String(format: "Service %@", service.uuid))
            peripheral.discoverCharacteristics([heartRateMeasurementUUID, bodySensorLocationUUID], for: service)
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        if let error = error {
            print("Error discovering characteristics: \(error.localizedDescription)")
            cleanup()
            return
        }
        guard let characteristics = service.characteristics else { return }
        for characteristic in characteristics {
            print(String(format: "Characteristic %@: %@", characteristic.uuid, characteristic.properties.description))
            if characteristic.uuid.isEqual(bodySensorLocationUUID) {
                peripheral.readValue(for: characteristic)
            } else if characteristic.uuid.isEqual(heartRateMeasurementUUID) {
                heartRateMeasurement = characteristic
                peripheral.setNotifyValue(true, for: characteristic)
            }
        }
    }

    func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?
    ) {
        if let error = error {
            print(
                String(
                    format: "Error changing notifications of %@: %@", characteristic.uuid, error.localizedDescription))
            return
        }
        print(
            String(format: "Notifications for %@: %@", characteristic.uuid, characteristic.isNotifying ? "on" : "off"))
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        if let error = error {
            print(String(format: "Error reading %@: %@", characteristic.uuid, error.localizedDescription))
            return
        }
        guard let data = characteristic.value, !data.isEmpty else { return }
        if characteristic.uuid.isEqual(bodySensorLocationUUID) {
            print("Body sensor location: \(bodyLocation(from: data))")
        } else if characteristic.isEqual(heartRateMeasurement) {
            let bpm = heartRate(from: data)
            heartRates.append(bpm)
            print("Heart rate: \(bpm) bpm")
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) {
        if let error = error {
            print("Error reading RSSI: \(error.localizedDescription)")
            return
        }
        print(String(format: "RSSI: %d dBm", RSSI.intValue))
    }

    // MARK: - Helpers

    func startScanning() {
        centralManager.scanForPeripherals(
            withServices: [heartRateServiceUUID], options: [CBCentralManagerScanOptionAllowDuplicatesKey: false])
        print(String(format: "Scanning for %@", heartRateServiceUUID))
    }

    /// Follows the signal strength once a second while connected.
    func startReadingRSSI(of peripheral: CBPeripheral) {
        rssiTimer?.invalidate()
        rssiTimer = Timer.scheduledTimer(withTimeInterval: 1.0, repeats: true) { [weak peripheral] _ in
            peripheral?.readRSSI()
        }
    }

    /// Unsubscribes and disconnects.
    func cleanup() {
        rssiTimer?.invalidate()
        rssiTimer = nil
        guard let peripheral = discoveredPeripheral, peripheral.state == .connected else { return }
        if let characteristic = heartRateMeasurement, characteristic.isNotifying {
            peripheral.setNotifyValue(false, for: characteristic)
        }
        centralManager.cancelPeripheralConnection(peripheral)
    }

    private func describe(_ authorization: CBManagerAuthorization) -> String {
        switch authorization {
        case .allowedAlways: return "allowed always"
        case .denied: return "denied"
        case .restricted: return "restricted"
        case .notDetermined: return "not determined"
        @unknown default: return "unknown"
        }
    }

    private func bodyLocation(from data: Data) -> String {
        switch data[data.startIndex] {
        case 0: return "Other"
        case 1: return "Chest"
        case 2: return "Wrist"
        case 3: return "Finger"
        case 4: return "Hand"
        case 5: return "Ear Lobe"
        case 6: return "Foot"
        default: return "Reserved"
        }
    }

    private func heartRate(from data: Data) -> Int {
        let bytes = [UInt8](data)
        // Bit 0 of the flags: the value is one byte, or two little-endian bytes.
        if bytes[0] & 0x01 == 0 {
            return bytes.count > 1 ? Int(bytes[1]) : 0
        }
        return bytes.count > 2 ? Int(bytes[1]) | Int(bytes[2]) << 8 : 0
    }
}
