// Core Bluetooth's class and protocol names, so code written for Apple's
// framework ports by changing its import line. The option, advertisement and
// restoration key constants are in CoreBluetoothKeys.swift.

/// Core Bluetooth's name for ``CentralManager``.
public typealias CBCentralManager = CentralManager
/// Core Bluetooth's name for ``CentralManagerDelegate``.
public typealias CBCentralManagerDelegate = CentralManagerDelegate
/// Core Bluetooth's name for ``Peripheral``.
public typealias CBPeripheral = Peripheral
/// Core Bluetooth's name for ``PeripheralDelegate``.
public typealias CBPeripheralDelegate = PeripheralDelegate
/// Core Bluetooth's name for ``PeripheralState``.
public typealias CBPeripheralState = PeripheralState
/// Core Bluetooth's name for ``Service``.
public typealias CBService = Service
/// Core Bluetooth's name for ``Characteristic``.
public typealias CBCharacteristic = Characteristic
/// Core Bluetooth's name for ``Descriptor``.
public typealias CBDescriptor = Descriptor

/// Core Bluetooth's name for ``PeripheralManager``.
public typealias CBPeripheralManager = PeripheralManager
/// Core Bluetooth's name for ``PeripheralManagerDelegate``.
public typealias CBPeripheralManagerDelegate = PeripheralManagerDelegate
/// Core Bluetooth's name for ``MutableService``.
public typealias CBMutableService = MutableService
/// Core Bluetooth's name for ``MutableCharacteristic``.
public typealias CBMutableCharacteristic = MutableCharacteristic
/// Core Bluetooth's name for ``MutableDescriptor``.
public typealias CBMutableDescriptor = MutableDescriptor
/// Core Bluetooth's name for ``Central``.
public typealias CBCentral = Central
/// Core Bluetooth's name for ``ATTRequest``.
public typealias CBATTRequest = ATTRequest

/// Core Foundation's absolute time, seconds since 1 January 2001 (`Date`'s reference date),
/// which Core Bluetooth's iOS 17 disconnection callback passes.
///
/// Foundation on Linux does not export Core Foundation's name, so BlueZKit declares it.
public typealias CFAbsoluteTime = Double
