import BlueZKit
import Foundation

/// A heart-rate sensor written as an iOS developer writes one with `CBPeripheralManager`:
/// publishes the Heart Rate service, advertises it, answers reads and writes and sends readings to
/// the subscribed centrals, honouring `updateValue`'s back-pressure.
class HeartRateSensor: NSObject, CBPeripheralManagerDelegate {
    var peripheralManager: CBPeripheralManager!
    var heartRateMeasurement: CBMutableCharacteristic!
    var bodySensorLocation: CBMutableCharacteristic!
    var controlPoint: CBMutableCharacteristic!
    let localName: String
    var pendingUpdates: [Data] = []

    // What it saw, for the tests (read on the manager's queue).
    var log: [String] = []
    var subscribedCentrals: [CBCentral] = []
    var energyExpendedResets = 0
    var readyCalls = 0
    var sentCount = 0

    init(localName: String, queue: DispatchQueue?, options: [String: Any]?) {
        self.localName = localName
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: options)
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else {
            log.append("state \(peripheral.state.rawValue)")
            return
        }
        log.append("powered on")
        heartRateMeasurement = CBMutableCharacteristic(
            type: heartRateMeasurementCharacteristicCBUUID, properties: [.notify], value: nil, permissions: [])
        bodySensorLocation = CBMutableCharacteristic(
            type: bodySensorLocationCharacteristicCBUUID, properties: [.read], value: nil, permissions: [.readable])
        controlPoint = CBMutableCharacteristic(
            type: heartRateControlPointCharacteristicCBUUID, properties: [.write], value: nil,
            permissions: [.writeable])
        let service = CBMutableService(type: heartRateServiceCBUUID, primary: true)
        service.characteristics = [heartRateMeasurement, bodySensorLocation, controlPoint]
        peripheralManager.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error {
            log.append("add failed: \(error.localizedDescription)")
            return
        }
        log.append("added \(service.uuid)")
        peripheralManager.startAdvertising([
            CBAdvertisementDataLocalNameKey: localName,
            CBAdvertisementDataServiceUUIDsKey: [heartRateServiceCBUUID],
        ])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append(error == nil ? "advertising" : "advertising failed: \(error!.localizedDescription)")
    }

    func peripheralManager(
        _ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic
    ) {
        log.append("subscribed \(characteristic.uuid)")
        if !subscribedCentrals.contains(central) { subscribedCentrals.append(central) }
    }

    func peripheralManager(
        _ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic
    ) {
        log.append("unsubscribed \(characteristic.uuid)")
        subscribedCentrals.removeAll { $0 == central }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == bodySensorLocationCharacteristicCBUUID else {
            peripheral.respond(to: request, withResult: .attributeNotFound)
            return
        }
        let value = Data([0x01])  // chest
        guard request.offset <= value.count else {
            peripheral.respond(to: request, withResult: .invalidOffset)
            return
        }
        request.value = value.subdata(in: request.offset..<value.count)
        peripheral.respond(to: request, withResult: .success)
        log.append("read \(request.characteristic.uuid)")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        for request in requests where request.characteristic.uuid != heartRateControlPointCharacteristicCBUUID {
            peripheral.respond(to: request, withResult: .writeNotPermitted)
            return
        }
        guard let request = requests.first, request.value == Data([0x01]) else {
            peripheral.respond(to: requests[0], withResult: .requestNotSupported)
            log.append("refused a control point command")
            return
        }
        energyExpendedResets += 1
        peripheral.respond(to: request, withResult: .success)
        log.append("energy expended reset")
    }

    /// Sends one reading to every subscriber; one that cannot go out now waits for
    /// `peripheralManagerIsReady(toUpdateSubscribers:)`.
    func send(heartRate: UInt8) {
        let value = Data([0x00, heartRate])
        guard pendingUpdates.isEmpty,
            peripheralManager.updateValue(value, for: heartRateMeasurement, onSubscribedCentrals: nil)
        else {
            pendingUpdates.append(value)
            return
        }
        sentCount += 1
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        readyCalls += 1
        while let value = pendingUpdates.first {
            guard peripheral.updateValue(value, for: heartRateMeasurement, onSubscribedCentrals: nil) else { return }
            pendingUpdates.removeFirst()
            sentCount += 1
        }
    }
}
