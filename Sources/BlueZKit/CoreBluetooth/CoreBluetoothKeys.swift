// Core Bluetooth's names, so code written for Apple's framework compiles
// against BlueZKit by changing its import line. The string values are
// Apple's, so dictionaries built with literal keys work too. (The manager
// classes' `CB` aliases live next to the managers.)

// MARK: Type aliases

/// Core Bluetooth's name for ``BluetoothUUID``.
public typealias CBUUID = BluetoothUUID
/// Core Bluetooth's name for ``CharacteristicProperties``.
public typealias CBCharacteristicProperties = CharacteristicProperties
/// Core Bluetooth's name for ``AttributePermissions``.
public typealias CBAttributePermissions = AttributePermissions
/// Core Bluetooth's name for ``CharacteristicWriteType``.
public typealias CBCharacteristicWriteType = CharacteristicWriteType
/// Core Bluetooth's name for ``ATTError``.
public typealias CBATTError = ATTError
/// Core Bluetooth's name for ``BluetoothError``.
public typealias CBError = BluetoothError
/// Core Bluetooth's name for ``ManagerState``.
public typealias CBManagerState = ManagerState
/// Core Bluetooth's name for ``ManagerAuthorization``.
public typealias CBManagerAuthorization = ManagerAuthorization
/// Core Bluetooth's name for ``Manager``, for its class property `CBManager.authorization`.
public typealias CBManager = Manager

// MARK: Advertisement data keys

/// The local name of a peripheral, a `String`.
public let CBAdvertisementDataLocalNameKey: String = "kCBAdvDataLocalName"
/// The manufacturer data of a peripheral, a `Data`: the company identifier
/// (little-endian) followed by the manufacturer's payload.
public let CBAdvertisementDataManufacturerDataKey: String = "kCBAdvDataManufacturerData"
/// Service-specific advertisement data, a `[BluetoothUUID: Data]`.
public let CBAdvertisementDataServiceDataKey: String = "kCBAdvDataServiceData"
/// The advertised service UUIDs, a `[BluetoothUUID]`.
public let CBAdvertisementDataServiceUUIDsKey: String = "kCBAdvDataServiceUUIDs"
/// Service UUIDs found in the overflow area, a `[BluetoothUUID]`.
///
/// Apple's value is `kCBAdvDataHashedServiceUUIDs`.
public let CBAdvertisementDataOverflowServiceUUIDsKey: String = "kCBAdvDataHashedServiceUUIDs"
/// The transmit power of a peripheral in dBm, an `NSNumber`.
public let CBAdvertisementDataTxPowerLevelKey: String = "kCBAdvDataTxPowerLevel"
/// Whether the advertising peripheral accepts connections, an `NSNumber` holding a `Bool`.
public let CBAdvertisementDataIsConnectable: String = "kCBAdvDataIsConnectable"
/// The solicited service UUIDs, a `[BluetoothUUID]`.
public let CBAdvertisementDataSolicitedServiceUUIDsKey: String = "kCBAdvDataSolicitedServiceUUIDs"

// MARK: Central manager options

/// Scan option: report every advertisement of a peripheral, not only the
/// first (and changed ones); a `Bool`, default `false`.
public let CBCentralManagerScanOptionAllowDuplicatesKey: String = "kCBScanOptionAllowDuplicates"
/// Scan option: also report peripherals soliciting these services; a
/// `[BluetoothUUID]`.
public let CBCentralManagerScanOptionSolicitedServiceUUIDsKey: String = "kCBScanOptionSolicitedServiceUUIDs"
/// Central manager option: warn the user when Bluetooth is off; a `Bool`.
/// Accepted and ignored on Linux.
public let CBCentralManagerOptionShowPowerAlertKey: String = "kCBInitOptionShowPowerAlert"
/// Central manager option: the restore identifier that keys the manager's
/// preserved state; a `String`.
public let CBCentralManagerOptionRestoreIdentifierKey: String = "kCBInitOptionRestoreIdentifier"

// MARK: Linux manager options

/// Linux manager option: the adapter to use, `"hci1"` or its address; a `String`.
///
/// Not Core Bluetooth's: the dictionary form of ``CentralManagerOptions/adapter``, for code that
/// creates its managers with Core Bluetooth's `[String: Any]` options (central and peripheral).
public let BlueZKitOptionAdapterKey: String = "BlueZKitOptionAdapter"
/// Linux manager option: the D-Bus address of the system bus to use; a `String`.
///
/// Not Core Bluetooth's: the dictionary form of ``CentralManagerOptions/busAddress`` (central and
/// peripheral). Tests point managers at a private bus with it.
public let BlueZKitOptionBusAddressKey: String = "BlueZKitOptionBusAddress"

/// Linux scan option: scan passively for advertisements that match a ``PassiveScan``'s
/// patterns; a ``PassiveScan``.
///
/// Not Core Bluetooth's: the dictionary form of ``ScanOptions/passive``.
public let BlueZKitScanOptionPassiveKey: String = "BlueZKitScanOptionPassive"

// MARK: Peripheral manager options

/// Peripheral manager option: warn the user when Bluetooth is off; a `Bool`.
/// Accepted and ignored on Linux. Apple's value is the central manager's.
public let CBPeripheralManagerOptionShowPowerAlertKey: String = "kCBInitOptionShowPowerAlert"
/// Peripheral manager option: the restore identifier that keys the
/// manager's preserved state; a `String`. Apple's value is the central
/// manager's.
public let CBPeripheralManagerOptionRestoreIdentifierKey: String = "kCBInitOptionRestoreIdentifier"

// MARK: Connect options

/// Connect option: alert the user when the peripheral connects while the
/// app is suspended; a `Bool`.
public let CBConnectPeripheralOptionNotifyOnConnectionKey: String = "kCBConnectOptionNotifyOnConnection"
/// Connect option: alert the user when the peripheral disconnects while the
/// app is suspended; a `Bool`.
public let CBConnectPeripheralOptionNotifyOnDisconnectionKey: String = "kCBConnectOptionNotifyOnDisconnection"
/// Connect option: alert the user of notifications received while the app
/// is suspended; a `Bool`.
public let CBConnectPeripheralOptionNotifyOnNotificationKey: String = "kCBConnectOptionNotifyOnNotification"
/// Connect option: reconnect automatically after the link drops; a `Bool`.
public let CBConnectPeripheralOptionEnableAutoReconnect: String = "kCBConnectOptionEnableAutoReconnect"

// MARK: Restored state keys

/// Restored central state: the peripherals that were connected or
/// connecting, a `[Peripheral]`.
public let CBCentralManagerRestoredStatePeripheralsKey: String = "kCBRestoredPeripherals"
/// Restored central state: the services the manager was scanning for, a
/// `[BluetoothUUID]`.
public let CBCentralManagerRestoredStateScanServicesKey: String = "kCBRestoredScanServices"
/// Restored central state: the scan options in use, a `[String: Any]`.
public let CBCentralManagerRestoredStateScanOptionsKey: String = "kCBRestoredScanOptions"
/// Restored peripheral state: the published services, a `[MutableService]`.
public let CBPeripheralManagerRestoredStateServicesKey: String = "kCBRestoredServices"
/// Restored peripheral state: the advertisement data being advertised, a
/// `[String: Any]`.
///
/// Apple's value is `kCBRestoredAdvertisement`.
public let CBPeripheralManagerRestoredStateAdvertisementDataKey: String = "kCBRestoredAdvertisement"

// MARK: Descriptor UUID strings

/// The UUID string of the Characteristic Extended Properties descriptor.
public let CBUUIDCharacteristicExtendedPropertiesString: String = "2900"
/// The UUID string of the Characteristic User Description descriptor.
public let CBUUIDCharacteristicUserDescriptionString: String = "2901"
/// The UUID string of the Client Characteristic Configuration descriptor.
public let CBUUIDClientCharacteristicConfigurationString: String = "2902"
/// The UUID string of the Server Characteristic Configuration descriptor.
public let CBUUIDServerCharacteristicConfigurationString: String = "2903"
/// The UUID string of the Characteristic Presentation Format descriptor.
public let CBUUIDCharacteristicFormatString: String = "2904"
/// The UUID string of the Characteristic Aggregate Format descriptor.
public let CBUUIDCharacteristicAggregateFormatString: String = "2905"
/// The UUID string of the Valid Range descriptor.
public let CBUUIDCharacteristicValidRangeString: String = "2906"
