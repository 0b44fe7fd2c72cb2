import BlueZKitTesting
import Foundation
import TestSupport
import Testing

@testable import BlueZKit
@testable import CoreBluetoothPort
@testable import CoreBluetoothPortSwift5

/// Every delegate method of Core Bluetooth's three protocols that BlueZKit has, written with
/// Apple's exact Swift signature in a class body (where the compiler does not warn about near
/// misses; the port's `AppleDelegateSignatures`, in both language modes): each must be the
/// protocol's witness, so that a call through the protocol reaches it.
@Suite(.timeLimit(.minutes(5))) struct CoreBluetoothWitnessTests {
    @Test(arguments: PortLanguageMode.allCases)
    func everyAppleSignatureIsTheWitness(_ mode: PortLanguageMode) async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(address: "C0:FF:EE:00:04:01", name: "Witness", serviceUUIDs: ["180D"])
        try bluez.addPeripheral(sensor)
        let manager = CBCentralManager(
            delegate: nil, queue: DispatchQueue(label: "test.witness"),
            options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let peripheral = try await firstDiscovery(manager, scanningFor: nil, advertising: sensor)
        let peripheralManager = CBPeripheralManager(
            delegate: nil, queue: nil, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        let service = CBMutableService(type: CBUUID(string: "180D"), primary: true)
        let characteristic = CBMutableCharacteristic(
            type: CBUUID(string: "2A37"), properties: [.notify], value: nil, permissions: [])
        let descriptor = CBMutableDescriptor(type: CBUUID(string: "2901"), value: "HR")
        let central = CBCentral(identifier: UUID(), maximumUpdateValueLength: 20)
        let error: (any Error)? = nil

        let app: any CBCentralManagerDelegate & CBPeripheralDelegate & CBPeripheralManagerDelegate & PortSignatures =
            switch mode {
            case .swift6: CoreBluetoothPort.AppleDelegateSignatures()
            case .swift5: CoreBluetoothPortSwift5.AppleDelegateSignatures()
            }
        let c: any CBCentralManagerDelegate = app
        c.centralManagerDidUpdateState(manager)
        c.centralManager(manager, willRestoreState: [:])
        c.centralManager(manager, didDiscover: peripheral, advertisementData: [:], rssi: NSNumber(value: -60))
        c.centralManager(manager, didConnect: peripheral)
        c.centralManager(manager, didFailToConnect: peripheral, error: error)
        c.centralManager(manager, didDisconnectPeripheral: peripheral, error: error)
        c.centralManager(
            manager, didDisconnectPeripheral: peripheral, timestamp: 0, isReconnecting: false, error: error)
        let p: any CBPeripheralDelegate = app
        p.peripheralDidUpdateName(peripheral)
        p.peripheral(peripheral, didModifyServices: [])
        p.peripheral(peripheral, didReadRSSI: NSNumber(value: -60), error: error)
        p.peripheral(peripheral, didDiscoverServices: error)
        p.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
        p.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
        p.peripheral(peripheral, didUpdateValueFor: characteristic as CBCharacteristic, error: error)
        p.peripheral(peripheral, didWriteValueFor: characteristic as CBCharacteristic, error: error)
        p.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
        p.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
        p.peripheral(peripheral, didUpdateValueFor: descriptor as CBDescriptor, error: error)
        p.peripheral(peripheral, didWriteValueFor: descriptor as CBDescriptor, error: error)
        p.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
        p.peripheral(peripheral, didOpen: nil, error: error)
        let m: any CBPeripheralManagerDelegate = app
        m.peripheralManagerDidUpdateState(peripheralManager)
        m.peripheralManager(peripheralManager, willRestoreState: [:])
        m.peripheralManagerDidStartAdvertising(peripheralManager, error: error)
        m.peripheralManager(peripheralManager, didAdd: service as CBService, error: error)
        m.peripheralManager(peripheralManager, central: central, didSubscribeTo: characteristic as CBCharacteristic)
        m.peripheralManager(peripheralManager, central: central, didUnsubscribeFrom: characteristic as CBCharacteristic)
        m.peripheralManagerIsReady(toUpdateSubscribers: peripheralManager)
        m.peripheralManager(peripheralManager, didPublishL2CAPChannel: 0x80, error: error)
        m.peripheralManager(peripheralManager, didUnpublishL2CAPChannel: 0x80, error: error)
        m.peripheralManager(peripheralManager, didOpen: nil, error: error)

        // didReceiveRead / didReceiveWrite take requests only the manager makes: the port's sensor
        // (CoreBluetoothPortTests) shows Apple's signatures for them are called.
        #expect(
            app.called == [
                "centralManagerDidUpdateState(_:)", "centralManager(_:willRestoreState:)",
                "centralManager(_:didDiscover:advertisementData:rssi:)", "centralManager(_:didConnect:)",
                "centralManager(_:didFailToConnect:error:)", "didDisconnectPeripheral error",
                "didDisconnectPeripheral timestamp",
                "peripheralDidUpdateName(_:)", "peripheral(_:didModifyServices:)", "peripheral(_:didReadRSSI:error:)",
                "peripheral(_:didDiscoverServices:)", "peripheral(_:didDiscoverIncludedServicesFor:error:)",
                "peripheral(_:didDiscoverCharacteristicsFor:error:)", "didUpdateValueFor characteristic",
                "didWriteValueFor characteristic", "peripheral(_:didUpdateNotificationStateFor:error:)",
                "peripheral(_:didDiscoverDescriptorsFor:error:)", "didUpdateValueFor descriptor",
                "didWriteValueFor descriptor", "peripheralIsReady(toSendWriteWithoutResponse:)", "peripheral didOpen",
                "peripheralManagerDidUpdateState(_:)", "peripheralManager willRestoreState",
                "peripheralManagerDidStartAdvertising(_:error:)", "peripheralManager(_:didAdd:error:)",
                "peripheralManager(_:central:didSubscribeTo:)", "peripheralManager(_:central:didUnsubscribeFrom:)",
                "peripheralManagerIsReady(toUpdateSubscribers:)",
                "peripheralManager(_:didPublishL2CAPChannel:error:)",
                "peripheralManager(_:didUnpublishL2CAPChannel:error:)", "peripheralManager didOpen",
            ])
    }
}

/// The port's catalogue of Apple's delegate signatures, from either language mode.
protocol PortSignatures: AnyObject {
    var called: [String] { get }
}

extension CoreBluetoothPort.AppleDelegateSignatures: PortSignatures {}
extension CoreBluetoothPortSwift5.AppleDelegateSignatures: PortSignatures {}
