// Core Bluetooth's names for the L2CAP channel API (L2CAP/), beside CoreBluetoothCompatibility.swift.

/// Core Bluetooth's name for ``L2CAPChannel``.
public typealias CBL2CAPChannel = L2CAPChannel
/// Core Bluetooth's name for ``L2CAPPSM``.
public typealias CBL2CAPPSM = L2CAPPSM
/// Core Bluetooth's name for ``Peer``.
public typealias CBPeer = Peer

/// The UUID of the characteristic in which, by Apple's convention, a peripheral publishes the PSM
/// of its L2CAP channel (as Core Bluetooth's `CBUUIDL2CAPPSMCharacteristicString`): the app adds
/// it to a service, readable, with the PSM ``PeripheralManager/publishL2CAPChannel(withEncryption:)``
/// reported, and centrals read it before ``Peripheral/openL2CAPChannel(_:)``.
public let CBUUIDL2CAPPSMCharacteristicString: String = "ABDD3056-28FA-441D-A470-55A75A52553A"
