import BlueZKit
import Testing

@Suite("Core Bluetooth compatibility names", .timeLimit(.minutes(5)))
struct CoreBluetoothKeysTests {
    static let values: [(String, String)] = [
        (CBAdvertisementDataLocalNameKey, "kCBAdvDataLocalName"),
        (CBAdvertisementDataManufacturerDataKey, "kCBAdvDataManufacturerData"),
        (CBAdvertisementDataServiceDataKey, "kCBAdvDataServiceData"),
        (CBAdvertisementDataServiceUUIDsKey, "kCBAdvDataServiceUUIDs"),
        (CBAdvertisementDataOverflowServiceUUIDsKey, "kCBAdvDataHashedServiceUUIDs"),
        (CBAdvertisementDataTxPowerLevelKey, "kCBAdvDataTxPowerLevel"),
        (CBAdvertisementDataIsConnectable, "kCBAdvDataIsConnectable"),
        (CBAdvertisementDataSolicitedServiceUUIDsKey, "kCBAdvDataSolicitedServiceUUIDs"),
        (CBCentralManagerScanOptionAllowDuplicatesKey, "kCBScanOptionAllowDuplicates"),
        (CBCentralManagerScanOptionSolicitedServiceUUIDsKey, "kCBScanOptionSolicitedServiceUUIDs"),
        (CBCentralManagerOptionShowPowerAlertKey, "kCBInitOptionShowPowerAlert"),
        (CBCentralManagerOptionRestoreIdentifierKey, "kCBInitOptionRestoreIdentifier"),
        (CBPeripheralManagerOptionShowPowerAlertKey, "kCBInitOptionShowPowerAlert"),
        (CBPeripheralManagerOptionRestoreIdentifierKey, "kCBInitOptionRestoreIdentifier"),
        (CBConnectPeripheralOptionNotifyOnConnectionKey, "kCBConnectOptionNotifyOnConnection"),
        (CBConnectPeripheralOptionNotifyOnDisconnectionKey, "kCBConnectOptionNotifyOnDisconnection"),
        (CBConnectPeripheralOptionNotifyOnNotificationKey, "kCBConnectOptionNotifyOnNotification"),
        (CBConnectPeripheralOptionEnableAutoReconnect, "kCBConnectOptionEnableAutoReconnect"),
        (CBCentralManagerRestoredStatePeripheralsKey, "kCBRestoredPeripherals"),
        (CBCentralManagerRestoredStateScanServicesKey, "kCBRestoredScanServices"),
        (CBCentralManagerRestoredStateScanOptionsKey, "kCBRestoredScanOptions"),
        (CBPeripheralManagerRestoredStateServicesKey, "kCBRestoredServices"),
        (CBPeripheralManagerRestoredStateAdvertisementDataKey, "kCBRestoredAdvertisement"),
        (CBUUIDCharacteristicExtendedPropertiesString, "2900"),
        (CBUUIDCharacteristicUserDescriptionString, "2901"),
        (CBUUIDClientCharacteristicConfigurationString, "2902"),
        (CBUUIDServerCharacteristicConfigurationString, "2903"),
        (CBUUIDCharacteristicFormatString, "2904"),
        (CBUUIDCharacteristicAggregateFormatString, "2905"),
        (CBUUIDCharacteristicValidRangeString, "2906"),
    ]

    @Test(arguments: values)
    func keyHasApplesValue(_ constant: String, _ expected: String) {
        #expect(constant == expected)
    }

    @Test func typeAliasesNameOurTypes() {
        #expect(CBUUID.self == BluetoothUUID.self)
        #expect(CBCharacteristicProperties.self == CharacteristicProperties.self)
        #expect(CBAttributePermissions.self == AttributePermissions.self)
        #expect(CBCharacteristicWriteType.self == CharacteristicWriteType.self)
        #expect(CBATTError.self == ATTError.self)
        #expect(CBError.self == BluetoothError.self)
        #expect(CBManagerState.self == ManagerState.self)
        // The seed's snippets, in Swift, compile unchanged.
        let heartRate = CBUUID(string: "180D")
        let custom = CBUUID(string: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(heartRate.uuidString == "180D")
        #expect(custom.uuidString == "71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(CBUUID(string: CBUUIDClientCharacteristicConfigurationString).shortValue == 0x2902)
    }
}
