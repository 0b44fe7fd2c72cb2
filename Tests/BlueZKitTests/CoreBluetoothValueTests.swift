import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Core Bluetooth's raw values, option dictionaries and identities, as Apple's SDK has them.
@Suite(.timeLimit(.minutes(5))) struct CoreBluetoothValueTests {
    @Test func managerStatesHaveApplesRawValues() {
        let expected: [(CBManagerState, Int)] = [
            (.unknown, 0), (.resetting, 1), (.unsupported, 2), (.unauthorized, 3), (.poweredOff, 4), (.poweredOn, 5),
        ]
        for (state, raw) in expected { #expect(state.rawValue == raw, "\(state)") }
        #expect(CBManagerState.allCases.count == expected.count)
    }

    @Test func peripheralStatesHaveApplesRawValues() {
        let expected: [(CBPeripheralState, Int)] = [
            (.disconnected, 0), (.connecting, 1), (.connected, 2), (.disconnecting, 3),
        ]
        for (state, raw) in expected {
            #expect(state.rawValue == raw, "\(state)")
            #expect(CBPeripheralState(rawValue: raw) == state)
        }
        #expect(CBPeripheralState(rawValue: 4) == nil)
    }

    @Test func characteristicPropertiesHaveApplesRawValues() {
        let expected: [(CBCharacteristicProperties, UInt)] = [
            (.broadcast, 0x01), (.read, 0x02), (.writeWithoutResponse, 0x04), (.write, 0x08), (.notify, 0x10),
            (.indicate, 0x20), (.authenticatedSignedWrites, 0x40), (.extendedProperties, 0x80),
            (.notifyEncryptionRequired, 0x100), (.indicateEncryptionRequired, 0x200),
        ]
        for (property, raw) in expected { #expect(property.rawValue == raw, "\(property)") }
    }

    @Test func attributePermissionsHaveApplesRawValues() {
        let expected: [(CBAttributePermissions, UInt)] = [
            (.readable, 0x01), (.writeable, 0x02), (.readEncryptionRequired, 0x04), (.writeEncryptionRequired, 0x08),
        ]
        for (permission, raw) in expected { #expect(permission.rawValue == raw, "\(permission)") }
    }

    @Test func writeTypesHaveApplesRawValues() {
        #expect(CBCharacteristicWriteType.withResponse.rawValue == 0)
        #expect(CBCharacteristicWriteType.withoutResponse.rawValue == 1)
    }

    @Test func errorCodesHaveApplesRawValues() {
        let expected: [(CBError.Code, Int)] = [
            (.unknown, 0), (.invalidParameters, 1), (.invalidHandle, 2), (.notConnected, 3), (.outOfSpace, 4),
            (.operationCancelled, 5), (.connectionTimeout, 6), (.peripheralDisconnected, 7), (.uuidNotAllowed, 8),
            (.alreadyAdvertising, 9), (.connectionFailed, 10), (.connectionLimitReached, 11), (.unknownDevice, 12),
            (.operationNotSupported, 13), (.peerRemovedPairingInformation, 14), (.encryptionTimedOut, 15),
            (.tooManyLEPairedDevices, 16),
        ]
        for (code, raw) in expected {
            #expect(code.rawValue == raw, "\(code)")
            #expect(CBError.Code(rawValue: raw) == code)
        }
    }

    @Test func attErrorCodesHaveApplesRawValues() {
        let expected: [(CBATTError.Code, Int)] = [
            (.success, 0), (.invalidHandle, 1), (.readNotPermitted, 2), (.writeNotPermitted, 3), (.invalidPdu, 4),
            (.insufficientAuthentication, 5), (.requestNotSupported, 6), (.invalidOffset, 7),
            (.insufficientAuthorization, 8), (.prepareQueueFull, 9), (.attributeNotFound, 0x0A),
            (.attributeNotLong, 0x0B), (.insufficientEncryptionKeySize, 0x0C), (.invalidAttributeValueLength, 0x0D),
            (.unlikelyError, 0x0E), (.insufficientEncryption, 0x0F), (.unsupportedGroupType, 0x10),
            (.insufficientResources, 0x11),
        ]
        for (code, raw) in expected {
            #expect(code.rawValue == raw, "\(code)")
            #expect(CBATTError.Code(rawValue: raw) == code)
        }
    }

    /// Apple's `CBError` and `CBATTError` are caught by type and switched on by `code`.
    @Test func errorsAreCaughtAndSwitchedOnAsWithCoreBluetooth() {
        func code(of error: any Error) -> String {
            do {
                throw error
            } catch let error as CBATTError {
                switch error.code {
                case .insufficientAuthentication: return "att authentication"
                default: return "att \(error.code.rawValue)"
                }
            } catch let error as CBError {
                switch error.code {
                case .peripheralDisconnected: return "disconnected"
                default: return "cb \(error.code.rawValue)"
                }
            } catch {
                return "other"
            }
        }
        #expect(code(of: BluetoothError(.peripheralDisconnected)) == "disconnected")
        #expect(code(of: BluetoothError(.connectionTimeout)) == "cb 6")
        #expect(code(of: ATTError(.insufficientAuthentication)) == "att authentication")
        #expect(code(of: ATTError(.invalidOffset)) == "att 7")
        #expect(code(of: CocoaError(.fileNoSuchFile)) == "other")
        // As Core Bluetooth's NSErrors, they describe themselves.
        #expect(BluetoothError(.peripheralDisconnected).localizedDescription == "The peripheral disconnected.")
        #expect(ATTError(.invalidOffset).localizedDescription == ATTError.Code.invalidOffset.message)
    }

    @Test func flagsAreReadFromNSNumbersAndBools() {
        let yes: [Any] = [NSNumber(value: true), true, NSNumber(value: 1)]
        for value in yes {
            #expect(ScanOptions(dictionary: [CBCentralManagerScanOptionAllowDuplicatesKey: value]).allowDuplicates)
            #expect(CentralManagerOptions(dictionary: [CBCentralManagerOptionShowPowerAlertKey: value]).showPowerAlert)
        }
        let no: [Any] = [NSNumber(value: false), false, NSNumber(value: 0), "yes"]
        for value in no {
            #expect(!ScanOptions(dictionary: [CBCentralManagerScanOptionAllowDuplicatesKey: value]).allowDuplicates)
            #expect(!CentralManagerOptions(dictionary: [CBCentralManagerOptionShowPowerAlertKey: value]).showPowerAlert)
        }
    }

    @Test func managersHaveApplesInitializerWithoutArguments() {
        // Referenced, not called: a manager made with them talks to the machine's own bus.
        let central: () -> CBCentralManager = CBCentralManager.init
        let peripheral: () -> CBPeripheralManager = CBPeripheralManager.init
        #expect(type(of: central) == (() -> CentralManager).self)
        #expect(type(of: peripheral) == (() -> PeripheralManager).self)
    }

    @Test func managerOptionsReadApplesAndLinuxKeys() {
        let options = CentralManagerOptions(dictionary: [
            CBCentralManagerOptionRestoreIdentifierKey: "door-lock",
            BlueZKitOptionAdapterKey: "hci1",
            BlueZKitOptionBusAddressKey: "unix:path=/tmp/bus",
        ])
        #expect(options.restoreIdentifier == "door-lock")
        #expect(options.adapter == "hci1")
        #expect(options.busAddress == "unix:path=/tmp/bus")
        #expect(
            CentralManagerOptions(dictionary: [CBPeripheralManagerOptionRestoreIdentifierKey: "sensor"])
                .restoreIdentifier == "sensor")
    }

    @Test func advertisementDataUsesApplesValueTypes() throws {
        let data = AdvertisementData(
            localName: "HRM", manufacturerData: Data([0x4C, 0x00, 0x01]),
            serviceData: [CBUUID(string: "180D"): Data([0x2A])], serviceUUIDs: [CBUUID(string: "180D")],
            txPowerLevel: -8, isConnectable: true)
        let dictionary = data.dictionary
        let txPower = try #require(dictionary[CBAdvertisementDataTxPowerLevelKey])
        let connectable = try #require(dictionary[CBAdvertisementDataIsConnectable])
        #expect(type(of: txPower) is NSNumber.Type)
        #expect(type(of: connectable) is NSNumber.Type)
        #expect((txPower as? NSNumber)?.intValue == -8)
        #expect((connectable as? NSNumber)?.boolValue == true)
        #expect(
            dictionary[CBAdvertisementDataServiceDataKey] as? [CBUUID: Data] == [CBUUID(string: "180D"): Data([0x2A])])
        #expect(dictionary[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] == [CBUUID(string: "180D")])
        #expect(dictionary[CBAdvertisementDataManufacturerDataKey] as? Data == Data([0x4C, 0x00, 0x01]))
        // Swift's casts read NSNumbers as Int and Bool too, and the dictionary reads back.
        #expect(dictionary[CBAdvertisementDataTxPowerLevelKey] as? Int == -8)
        #expect(dictionary[CBAdvertisementDataIsConnectable] as? Bool == true)
        #expect(try AdvertisementData(dictionary: dictionary) == data)
    }

    @Test func mutableAttributesAreSubclassesAsInCoreBluetooth() {
        let characteristic = CBMutableCharacteristic(
            type: CBUUID(string: "2A37"), properties: [.notify], value: nil, permissions: [])
        let descriptor = CBMutableDescriptor(
            type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString), value: Data("HR".utf8))
        characteristic.descriptors = [descriptor]
        let service = CBMutableService(type: CBUUID(string: "180D"), primary: true)
        service.characteristics = [characteristic]
        let asService: CBService = service
        let asCharacteristic: CBCharacteristic = characteristic
        let asDescriptor: CBDescriptor = descriptor
        #expect(asService.characteristics?.first === characteristic)
        #expect(asCharacteristic.descriptors?.first === descriptor)
        #expect(asDescriptor.value as? String == "HR")
        #expect(asDescriptor.data == Data("HR".utf8))
        #expect(asService.isPrimary && asService.uuid == CBUUID(string: "180D"))
        #expect(asService.peripheral == nil && asCharacteristic.service == nil)
        // Identity, as Core Bluetooth's objects compare.
        #expect(asService == service && asService != CBMutableService(type: CBUUID(string: "180D"), primary: true))
        #expect(Set<CBCharacteristic>([characteristic, characteristic]).count == 1)
    }

    /// As in Core Bluetooth, a mutable characteristic's properties, permissions and value can be
    /// set after creation, before its service is added; what is published is what they are then.
    @Test func mutableCharacteristicsAreSetUpAfterCreation() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let manager = CBPeripheralManager(
            delegate: nil, queue: nil, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { manager.state == .poweredOn }
        let characteristic = CBMutableCharacteristic(
            type: CBUUID(string: "2A38"), properties: [.notify], value: nil, permissions: [])
        characteristic.properties = [.read]
        characteristic.permissions = [.readable]
        characteristic.value = Data([0x07])
        #expect(characteristic.properties == [.read] && characteristic.permissions == [.readable])
        let service = CBMutableService(type: CBUUID(string: "180D"), primary: true)
        service.characteristics = [characteristic]
        manager.add(service)
        try await waitUntil("registered") { bluez.adapters.first?.registeredApplications.count == 1 }
        let central = try bluez.addCentral(address: "11:22:33:44:55:38")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x07])
    }

    @Test func mutableDescriptorsTakeApplesValueTypes() {
        let name = CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString), value: "Heart")
        let extended = CBMutableDescriptor(
            type: CBUUID(string: CBUUIDCharacteristicExtendedPropertiesString), value: NSNumber(value: 0x0001))
        let format = CBMutableDescriptor(
            type: CBUUID(string: CBUUIDCharacteristicFormatString),
            value: Data([0x04, 0x00, 0xAD, 0x27, 0x01, 0x00, 0x00]))
        let empty = CBMutableDescriptor(type: CBUUID(string: "2901"), value: nil)
        #expect(name.data == Data("Heart".utf8))
        #expect(name.value as? String == "Heart")
        #expect(extended.data == Data([0x01, 0x00]))
        #expect((extended.value as? NSNumber)?.intValue == 1)
        #expect(format.value as? Data == Data([0x04, 0x00, 0xAD, 0x27, 0x01, 0x00, 0x00]))
        #expect(empty.data == Data())
        #expect(empty.value as? String == "")
    }

    @Test func aMutableDescriptorOfAnotherValueTypeTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = CBMutableDescriptor(type: CBUUID(string: "2901"), value: [1, 2, 3])
        }
    }

    /// Descriptor values read from a peripheral are typed as Core Bluetooth types them.
    @Test func descriptorValuesReadAreTypedAsInCoreBluetooth() async throws {
        let fixture = try await CentralFixture.make()
        defer { fixture.bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:03:01", name: "Desc", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        SimulatedCharacteristic(
                            uuid: "2A37", flags: ["notify"],
                            descriptors: [
                                SimulatedDescriptor(uuid: "2901", flags: ["read"], value: Array("Heart rate".utf8)),
                                SimulatedDescriptor(uuid: "2904", flags: ["read"], value: [0x04, 0x00, 0xAD, 0x27]),
                            ])
                    ])
            ])
        try fixture.bluez.addPeripheral(sensor)
        let peripheral = try await firstDiscovery(fixture.central, scanningFor: nil, advertising: sensor)
        let events = RecordingPeripheralDelegate()
        peripheral.delegate = events
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        peripheral.discoverServices(nil)
        try await waitUntil("services") { events.events.count == 1 }
        let service = try #require(peripheral.services?.first { $0.uuid == CBUUID(string: "180D") })
        peripheral.discoverCharacteristics(nil, for: service)
        try await waitUntil("characteristics") { events.events.count == 2 }
        let characteristic = try #require(service.characteristics?.first)
        peripheral.discoverDescriptors(for: characteristic)
        try await waitUntil("descriptors") { events.events.count == 3 }
        let descriptors = characteristic.descriptors ?? []
        for descriptor in descriptors { peripheral.readValue(for: descriptor) }
        try await waitUntil("descriptor values") { events.events.count == 3 + descriptors.count }
        func value(_ uuid: String) -> Any? { descriptors.first { $0.uuid == CBUUID(string: uuid) }?.value }
        #expect(value("2901") as? String == "Heart rate")
        #expect((value("2902") as? NSNumber)?.intValue == 0)
        #expect(value("2904") as? Data == Data([0x04, 0x00, 0xAD, 0x27]))
    }

    /// `class X: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate` works, and peripherals
    /// are dictionary keys compared by identity: the manager returns the same object for a device.
    @Test func nsObjectDelegatesAndPeripheralsAsKeys() async throws {
        final class App: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
            let queue = DispatchQueue(label: "test.nsobject-app")
            var seen: [CBPeripheral: Int] = [:]
            func centralManagerDidUpdateState(_ central: CBCentralManager) {}
            func centralManager(
                _ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                rssi RSSI: NSNumber
            ) {
                seen[peripheral, default: 0] += 1
            }
        }
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(address: "C0:FF:EE:00:02:01", name: "Key", serviceUUIDs: ["180D"])
        try bluez.addPeripheral(sensor)
        let app = App()
        let central = CBCentralManager(
            delegate: app, queue: app.queue, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { central.state == .poweredOn }
        central.scanForPeripherals(
            withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: NSNumber(value: true)])
        sensor.advertise()
        try await waitUntil("seen") { app.queue.sync { app.seen.values.reduce(0, +) } >= 1 }
        sensor.rssi = -40
        sensor.advertise()
        try await waitUntil("seen twice") { app.queue.sync { app.seen.values.reduce(0, +) } >= 2 }
        central.stopScan()
        let seen = app.queue.sync { app.seen }
        #expect(seen.count == 1, "one device, one key")
        let peripheral = try #require(seen.keys.first)
        #expect(central.retrievePeripherals(withIdentifiers: [peripheral.identifier]).first == peripheral)
    }
}
