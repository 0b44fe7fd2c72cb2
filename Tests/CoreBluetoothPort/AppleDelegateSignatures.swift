import BlueZKit
import Foundation

/// Every delegate method of Core Bluetooth's three protocols that BlueZKit has, with Apple's exact
/// Swift signature, declared in the class body as apps usually do (where Swift does not warn about
/// a near miss). Each records its call; CoreBluetoothWitnessTests calls each requirement through
/// the protocol and expects this class's method to answer.
class AppleDelegateSignatures: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate,
    CBPeripheralManagerDelegate
{
    var called: [String] = []

    // CBCentralManagerDelegate
    func centralManagerDidUpdateState(_ central: CBCentralManager) { called.append(#function) }
    func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any]) {
        called.append(#function)
    }
    func centralManager(
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) { called.append(#function) }
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        called.append(#function)
    }
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        called.append(#function)
    }
    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?
    ) { called.append("didDisconnectPeripheral error") }
    func centralManager(
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
        timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?
    ) { called.append("didDisconnectPeripheral timestamp") }

    // CBPeripheralDelegate
    func peripheralDidUpdateName(_ peripheral: CBPeripheral) { called.append(#function) }
    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) {
        called.append(#function)
    }
    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) {
        called.append(#function)
    }
    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) { called.append(#function) }
    func peripheral(
        _ peripheral: CBPeripheral, didDiscoverIncludedServicesFor service: CBService, error: Error?
    ) { called.append(#function) }
    func peripheral(
        _ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?
    ) { called.append(#function) }
    func peripheral(
        _ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?
    ) { called.append("didUpdateValueFor characteristic") }
    func peripheral(
        _ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?
    ) { called.append("didWriteValueFor characteristic") }
    func peripheral(
        _ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?
    ) { called.append(#function) }
    func peripheral(
        _ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?
    ) { called.append(#function) }
    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?) {
        called.append("didUpdateValueFor descriptor")
    }
    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor descriptor: CBDescriptor, error: Error?) {
        called.append("didWriteValueFor descriptor")
    }
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) { called.append(#function) }
    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        called.append("peripheral didOpen")
    }

    // CBPeripheralManagerDelegate
    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { called.append(#function) }
    func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {
        called.append("peripheralManager willRestoreState")
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        called.append(#function)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        called.append(#function)
    }
    func peripheralManager(
        _ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic
    ) { called.append(#function) }
    func peripheralManager(
        _ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic
    ) { called.append(#function) }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        called.append(#function)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        called.append(#function)
    }
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        called.append(#function)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        called.append(#function)
    }
    func peripheralManager(
        _ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?
    ) { called.append(#function) }
    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        called.append("peripheralManager didOpen")
    }
}
