/// An advertisement registered with the simulated bluetoothd through
/// `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`, as bluetoothd parsed it from the
/// application's `LEAdvertisement1` properties.
///
/// Get the advertisements of an adapter from ``SimulatedAdapter/registeredAdvertisements``.
public struct SimulatedAdvertisement: Sendable, Hashable {
    /// The unique bus name of the application's connection.
    public var owner: String
    /// The advertisement object's path.
    public var path: String
    /// `Type`: `"peripheral"` (connectable) or `"broadcast"`.
    public var type: String
    /// `ServiceUUIDs`, in their 128-bit lowercase form.
    public var serviceUUIDs: [String]
    /// `SolicitUUIDs`, in their 128-bit lowercase form.
    public var solicitUUIDs: [String]
    /// `ManufacturerData`: company identifier → bytes.
    public var manufacturerData: [UInt16: [UInt8]]
    /// `ServiceData`: 128-bit lowercase UUID → bytes.
    public var serviceData: [String: [UInt8]]
    /// `LocalName`; nil when absent or empty.
    public var localName: String?
    /// `Includes` that bluetoothd supports (`tx-power`, `appearance`, `local-name`), in the given order.
    public var includes: [String]
    /// `Appearance`, if set.
    public var appearance: UInt16?
    /// `Discoverable`, if set.
    public var discoverable: Bool?
    /// `Timeout` in seconds, if set: bluetoothd calls `Release` and drops the advertisement when it expires.
    public var timeout: UInt16?
    /// `MinInterval` in milliseconds as bluetoothd took it; nil when absent or ignored (5.66
    /// without `--experimental`).
    public var minimumInterval: UInt32? = nil
    /// `MaxInterval` in milliseconds as bluetoothd took it; nil when absent or ignored.
    public var maximumInterval: UInt32? = nil
    /// `TxPower` in dBm as bluetoothd took it; nil when absent or ignored.
    public var txPower: Int16? = nil
    /// `SecondaryChannel` ("1M", "2M", "Coded"), if set.
    public var secondaryChannel: String? = nil

    /// The length of the advertising data bluetoothd hands to the kernel (without what the kernel adds).
    public var dataLength: Int {
        var length = discoverable == true ? 3 : 0
        for size in [2, 4, 16] {
            let services = serviceUUIDSizes.filter { $0 == size }.count
            if services > 0 { length += 2 + size * services }
            let solicits = solicitUUIDSizes.filter { $0 == size }.count
            if solicits > 0 { length += 2 + size * solicits }
        }
        length += manufacturerData.values.reduce(0) { $0 + 4 + $1.count }
        length += serviceData.reduce(0) { $0 + 2 + Self.shortSize($1.key) + $1.value.count }
        if appearance != nil || includes.contains("appearance") { length += 4 }
        return length
    }

    /// How many bytes of the 31 are left for the data: the kernel adds flags (3 bytes) for a
    /// discoverable peripheral without its own flags, TX power (3) and appearance (4) when included.
    func maximumDataLength(adapterDiscoverable: Bool, advertisingLength: Int = 31) -> Int {
        var maximum = advertisingLength
        if includes.contains("tx-power") { maximum -= 3 }
        if type == "peripheral" && adapterDiscoverable && discoverable != true { maximum -= 3 }
        if includes.contains("appearance") { maximum -= 4 }
        return maximum
    }

    /// The on-air size of each service UUID as written (a 128-bit UUID stays 16 bytes).
    var serviceUUIDSizes: [Int] = []
    /// The on-air size of each solicited UUID as written.
    var solicitUUIDSizes: [Int] = []

    /// The size of the UUID of a service-data entry: 2 for the Bluetooth base, else 16.
    static func shortSize(_ uuid: String) -> Int {
        guard uuid.hasSuffix(BluetoothText.baseSuffix), uuid.hasPrefix("0000") else {
            return uuid.hasSuffix(BluetoothText.baseSuffix) ? 4 : 16
        }
        return 2
    }
}
