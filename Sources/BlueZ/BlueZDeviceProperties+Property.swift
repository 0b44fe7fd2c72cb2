extension BlueZDeviceProperties {
    /// An `org.bluez.Device1` property this layer reads. Each one's name on the bus is declared
    /// once, in ``name``; the layer above names a property by this type and never by its string
    /// (``BlueZClient/Event/deviceChanged(_:_:changed:)`` carries a `Set<Property>`). bluer's
    /// property table is the model.
    package enum Property: Sendable, Hashable, CaseIterable {
        case address, addressType, name, alias, adapter, rssi, txPower, uuids, manufacturerData, serviceData
        case advertisingFlags, advertisingData, connected, servicesResolved, paired, bonded, trusted

        /// Its name on the bus, such as `ServicesResolved`: the table.
        package var name: String {
            switch self {
            case .address: "Address"
            case .addressType: "AddressType"
            case .name: "Name"
            case .alias: "Alias"
            case .adapter: "Adapter"
            case .rssi: "RSSI"
            case .txPower: "TxPower"
            case .uuids: "UUIDs"
            case .manufacturerData: "ManufacturerData"
            case .serviceData: "ServiceData"
            case .advertisingFlags: "AdvertisingFlags"
            case .advertisingData: "AdvertisingData"
            case .connected: "Connected"
            case .servicesResolved: "ServicesResolved"
            case .paired: "Paired"
            case .bonded: "Bonded"
            case .trusted: "Trusted"
            }
        }

        /// Whether a change of it means an advertisement was received: the properties that
        /// carry advertisement content.
        package var carriesAdvertisement: Bool {
            switch self {
            case .rssi, .txPower, .manufacturerData, .serviceData, .advertisingFlags, .advertisingData: true
            default: false
            }
        }

        private static let byName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.name, $0) })

        /// The property of that name, or `nil` for one this layer does not read.
        package init?(name: String) {
            guard let property = Self.byName[name] else { return nil }
            self = property
        }

        /// Whether a property of that name carries advertisement content (unknown names do not).
        static func carriesAdvertisement(_ name: String) -> Bool {
            Property(name: name)?.carriesAdvertisement ?? false
        }
    }
}
