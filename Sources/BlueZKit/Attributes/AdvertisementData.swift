public import Foundation

/// The data of an advertisement: what a central saw when it discovered a
/// peripheral, or what a peripheral manager advertises.
///
/// Core Bluetooth hands this over as a `[String: Any]` dictionary keyed by
/// `CBAdvertisementData…Key` constants. This is a typed struct instead, so it
/// is `Sendable`, but it answers the same keys, so ported code keeps
/// working:
///
/// ```swift
/// let name = advertisementData.localName
/// let same = advertisementData[CBAdvertisementDataLocalNameKey] as? String
/// ```
///
/// Empty collections and `nil` values are absent: the subscript returns
/// `nil` for them and ``dictionary`` leaves their keys out, as Core Bluetooth
/// does.
public struct AdvertisementData: Hashable, Sendable, Codable {
    /// The peripheral's local name (`CBAdvertisementDataLocalNameKey`).
    public var localName: String?

    /// The manufacturer-specific data (`CBAdvertisementDataManufacturerDataKey`),
    /// laid out as Core Bluetooth does: the two-byte company identifier
    /// assigned by the Bluetooth SIG, little-endian, followed by the
    /// manufacturer's payload.
    ///
    /// For example Apple (company 0x004C) with payload `02 15` is
    /// `4C 00 02 15`. BlueZ keeps the identifier and payload apart; the
    /// library joins and splits them. Data shorter than two bytes has no
    /// company identifier, so BlueZ cannot advertise it.
    public var manufacturerData: Data?

    /// Service-specific data, keyed by service UUID
    /// (`CBAdvertisementDataServiceDataKey`).
    public var serviceData: [BluetoothUUID: Data]

    /// The advertised service UUIDs (`CBAdvertisementDataServiceUUIDsKey`).
    public var serviceUUIDs: [BluetoothUUID]

    /// Service UUIDs found in the overflow area
    /// (`CBAdvertisementDataOverflowServiceUUIDsKey`).
    ///
    /// The overflow area is an Apple mechanism; BlueZ never reports one, so
    /// on Linux this is empty for discovered peripherals.
    public var overflowServiceUUIDs: [BluetoothUUID]

    /// The transmit power in dBm (`CBAdvertisementDataTxPowerLevelKey`).
    public var txPowerLevel: Int?

    /// Whether the advertiser accepts connections
    /// (`CBAdvertisementDataIsConnectable`), or `nil` when unknown.
    public var isConnectable: Bool?

    /// The solicited service UUIDs
    /// (`CBAdvertisementDataSolicitedServiceUUIDsKey`).
    public var solicitedServiceUUIDs: [BluetoothUUID]

    /// Creates advertisement data; every field is optional.
    public init(
        localName: String? = nil,
        manufacturerData: Data? = nil,
        serviceData: [BluetoothUUID: Data] = [:],
        serviceUUIDs: [BluetoothUUID] = [],
        overflowServiceUUIDs: [BluetoothUUID] = [],
        txPowerLevel: Int? = nil,
        isConnectable: Bool? = nil,
        solicitedServiceUUIDs: [BluetoothUUID] = []
    ) {
        self.localName = localName
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.serviceUUIDs = serviceUUIDs
        self.overflowServiceUUIDs = overflowServiceUUIDs
        self.txPowerLevel = txPowerLevel
        self.isConnectable = isConnectable
        self.solicitedServiceUUIDs = solicitedServiceUUIDs
    }

    /// Reads a Core Bluetooth advertisement dictionary, as passed to
    /// `startAdvertising(_:)`, checking each value's type.
    ///
    /// Accepted values: `String` for the local name; `Data` for manufacturer
    /// data; `[BluetoothUUID: Data]` for service data; `[BluetoothUUID]` for
    /// the three UUID lists; an integer (or `NSNumber`) in -127…127 for the
    /// transmit power; a `Bool` (or the integers 0 and 1, as `NSNumber`
    /// booleans are) for connectability. Keys this type does not know are
    /// ignored, as Core Bluetooth ignores keys it does not advertise.
    ///
    /// - Throws: ``AdvertisementDataError`` naming the first key whose value
    ///   has the wrong type or is out of range (keys are checked in the order
    ///   of the properties above).
    public init(dictionary: [String: Any]) throws(AdvertisementDataError) {
        self.init()
        localName = try Self.value(dictionary, CBAdvertisementDataLocalNameKey, "a String")
        manufacturerData = try Self.value(dictionary, CBAdvertisementDataManufacturerDataKey, "Data")
        serviceData = try Self.value(dictionary, CBAdvertisementDataServiceDataKey, "a [BluetoothUUID: Data]") ?? [:]
        serviceUUIDs = try Self.uuids(dictionary, CBAdvertisementDataServiceUUIDsKey)
        overflowServiceUUIDs = try Self.uuids(dictionary, CBAdvertisementDataOverflowServiceUUIDsKey)
        txPowerLevel = try Self.txPower(dictionary)
        isConnectable = try Self.connectable(dictionary)
        solicitedServiceUUIDs = try Self.uuids(dictionary, CBAdvertisementDataSolicitedServiceUUIDsKey)
    }

    /// The value for a Core Bluetooth advertisement key, typed as Core
    /// Bluetooth types it, or `nil` if the key is absent or unknown.
    ///
    /// `String` for the local name, `Data` for manufacturer data,
    /// `[BluetoothUUID: Data]` for service data, `[BluetoothUUID]` for the
    /// UUID lists, and `NSNumber` for the transmit power and connectability
    /// (Apple's types; `as? Int` and `as? Bool` read them too).
    public subscript(key: String) -> Any? {
        switch key {
        case CBAdvertisementDataLocalNameKey: localName
        case CBAdvertisementDataManufacturerDataKey: manufacturerData
        case CBAdvertisementDataServiceDataKey: serviceData.isEmpty ? nil : serviceData
        case CBAdvertisementDataServiceUUIDsKey: serviceUUIDs.isEmpty ? nil : serviceUUIDs
        case CBAdvertisementDataOverflowServiceUUIDsKey: overflowServiceUUIDs.isEmpty ? nil : overflowServiceUUIDs
        case CBAdvertisementDataTxPowerLevelKey: txPowerLevel.map { NSNumber(value: $0) }
        case CBAdvertisementDataIsConnectable: isConnectable.map { NSNumber(value: $0) }
        case CBAdvertisementDataSolicitedServiceUUIDsKey: solicitedServiceUUIDs.isEmpty ? nil : solicitedServiceUUIDs
        default: nil
        }
    }

    /// Every present value under its Core Bluetooth key, as the dictionary
    /// Core Bluetooth would pass.
    ///
    /// Built on each access; ``init(dictionary:)`` reads it back to an equal
    /// value.
    public var dictionary: [String: Any] {
        var result: [String: Any] = [:]
        for key in Self.keys {
            if let value = self[key] { result[key] = value }
        }
        return result
    }

    /// The keys this type answers, in the order of its properties.
    private static let keys = [
        CBAdvertisementDataLocalNameKey, CBAdvertisementDataManufacturerDataKey,
        CBAdvertisementDataServiceDataKey, CBAdvertisementDataServiceUUIDsKey,
        CBAdvertisementDataOverflowServiceUUIDsKey, CBAdvertisementDataTxPowerLevelKey,
        CBAdvertisementDataIsConnectable, CBAdvertisementDataSolicitedServiceUUIDsKey,
    ]

    // MARK: Reading the dictionary

    private static func value<T>(
        _ dictionary: [String: Any], _ key: String, _ expected: String
    ) throws(AdvertisementDataError) -> T? {
        guard let raw = dictionary[key] else { return nil }
        guard let value = raw as? T else { throw wrongType(key, expected, raw) }
        return value
    }

    private static func uuids(_ dictionary: [String: Any], _ key: String) throws(AdvertisementDataError)
        -> [BluetoothUUID]
    {
        try value(dictionary, key, "a [BluetoothUUID]") ?? []
    }

    private static func txPower(_ dictionary: [String: Any]) throws(AdvertisementDataError) -> Int? {
        let key = CBAdvertisementDataTxPowerLevelKey
        guard let raw = dictionary[key] else { return nil }
        let number: Int?
        if let int = raw as? Int {
            number = int
        } else if let integer = raw as? any BinaryInteger {
            guard let exact = Int(exactly: integer) else { throw outOfRange(key, raw) }
            number = exact
        } else {
            number = nil
        }
        guard let number else { throw wrongType(key, "an integer", raw) }
        guard (-127...127).contains(number) else { throw outOfRange(key, raw) }
        return number
    }

    private static func connectable(_ dictionary: [String: Any]) throws(AdvertisementDataError) -> Bool? {
        let key = CBAdvertisementDataIsConnectable
        guard let raw = dictionary[key] else { return nil }
        if let flag = raw as? Bool { return flag }
        if let int = raw as? Int, int == 0 || int == 1 { return int == 1 }
        throw wrongType(key, "a Bool", raw)
    }

    private static func wrongType(_ key: String, _ expected: String, _ found: Any) -> AdvertisementDataError {
        AdvertisementDataError(
            .wrongValueType, key: key,
            message: "The value for \(key) must be \(expected), not \(type(of: found)).")
    }

    private static func outOfRange(_ key: String, _ found: Any) -> AdvertisementDataError {
        AdvertisementDataError(
            .valueOutOfRange, key: key,
            message: "The value for \(key) must be between -127 and 127 dBm, not \(found).")
    }
}
