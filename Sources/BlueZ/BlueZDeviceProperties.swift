import DBus

/// The `org.bluez.Device1` properties a central needs, read from BlueZ's
/// property dictionary. A property that is missing or has an unexpected type
/// is treated as absent (and never traps): bluetoothd's input is not trusted.
package struct BlueZDeviceProperties: Sendable, Hashable {
    package var address: String?
    /// "public" or "random".
    package var addressType: String?
    package var name: String?
    package var alias: String?
    /// The adapter the device belongs to (`/org/bluez/hci0`).
    var adapter: ObjectPath?
    /// Present only while BlueZ has a fresh advertisement (invalidated when discovery stops).
    package var rssi: Int16?
    package var txPower: Int16?
    /// Advertised (or resolved) service UUIDs, as BlueZ writes them (lower-case, 128-bit).
    package var uuids: [String]
    /// Company identifier → payload.
    package var manufacturerData: [UInt16: [UInt8]]
    /// Service UUID → payload.
    package var serviceData: [String: [UInt8]]
    /// The flags byte(s) of the last advertisement.
    package var advertisingFlags: [UInt8]?
    /// Raw advertising data by AD type (BlueZ's `AdvertisingData`, experimental in 5.66).
    package var advertisingData: [UInt8: [UInt8]]
    package var connected: Bool
    package var servicesResolved: Bool
    package var paired: Bool
    package var bonded: Bool
    package var trusted: Bool

    init(_ properties: [String: DBusValue]) {
        address = properties[Property.address.name]?.stringValue
        addressType = properties[Property.addressType.name]?.stringValue
        name = properties[Property.name.name]?.stringValue
        alias = properties[Property.alias.name]?.stringValue
        adapter = properties[Property.adapter.name]?.objectPathValue
        rssi = properties[Property.rssi.name]?.int16Value
        txPower = properties[Property.txPower.name]?.int16Value
        uuids = properties[Property.uuids.name]?.stringArrayValue ?? []
        manufacturerData = Self.keyedBytes(properties[Property.manufacturerData.name]) { $0.uint16Value }
        serviceData = Self.keyedBytes(properties[Property.serviceData.name]) { $0.stringValue }
        advertisingFlags = properties[Property.advertisingFlags.name]?.bytesValue
        advertisingData = Self.keyedBytes(properties[Property.advertisingData.name]) { $0.byteValue }
        connected = properties[Property.connected.name]?.boolValue ?? false
        servicesResolved = properties[Property.servicesResolved.name]?.boolValue ?? false
        paired = properties[Property.paired.name]?.boolValue ?? false
        bonded = properties[Property.bonded.name]?.boolValue ?? paired
        trusted = properties[Property.trusted.name]?.boolValue ?? false
    }

    /// `a{Kv}` with `ay` values → `[K: [UInt8]]`; entries of another shape are skipped.
    private static func keyedBytes<Key: Hashable>(_ value: DBusValue?, key: (DBusValue) -> Key?) -> [Key: [UInt8]] {
        guard let entries = value?.dictionaryEntries else { return [:] }
        var result: [Key: [UInt8]] = [:]
        for entry in entries {
            guard let k = key(entry.key), let bytes = entry.value.bytesValue else { continue }
            result[k] = bytes
        }
        return result
    }
}
