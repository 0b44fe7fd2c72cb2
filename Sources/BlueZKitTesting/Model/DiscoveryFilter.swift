internal import DBus

/// One client's discovery filter, parsed as bluetoothd 5.66 parses `SetDiscoveryFilter` (`parse_discovery_filter_dict`).
struct DiscoveryFilter: Sendable, Hashable {
    /// Scan types, as the kernel's discovery type bits: BR/EDR and LE.
    static let bredr: UInt8 = 0x01
    static let le: UInt8 = 0x06
    static let auto: UInt8 = bredr | le

    /// 128-bit UUIDs; empty matches any device.
    var uuids: [String] = []
    var rssi: Int16?
    var pathloss: UInt16?
    var transport: UInt8 = auto
    var duplicateData = false
    var discoverable = false
    var pattern: String?

    /// The keys `GetDiscoveryFilters` lists, in bluetoothd's order.
    static let keys = ["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"]

    /// What `SetDiscoveryFilter`'s argument means: a filter, no filter (an empty dictionary), or invalid arguments.
    enum Parsed: Sendable {
        case filter(DiscoveryFilter)
        case cleared
        case invalid
    }

    /// Parses the `a{sv}` argument; the transport is the adapter's `scanType` unless given.
    /// Unknown keys, wrong types, an RSSI outside −127…20, a pathloss over 137, an unknown
    /// transport or both RSSI and pathloss are invalid.
    static func parse(_ argument: DBusValue, scanType: UInt8 = auto) -> Parsed {
        guard let entries = argument.dictionaryEntries else { return .invalid }
        if entries.isEmpty { return .cleared }
        var filter = DiscoveryFilter(transport: scanType)
        for entry in entries {
            guard case .string(let key) = entry.key, case .variant(let value) = entry.value else { return .invalid }
            guard filter.apply(key, value) else { return .invalid }
        }
        if filter.rssi != nil && filter.pathloss != nil { return .invalid }
        return .filter(filter)
    }

    /// Whether bluetoothd 5.67 and later merge this filter as a regular discovery (de8e7cfce,
    /// `merge_discovery_filters`): nothing in it asks for filtering but, at most, `Discoverable`,
    /// and its transport is the adapter's scan type. A regular discovery reports LE advertisers
    /// only when they carry a discoverable flag.
    func isRegular(scanType: UInt8) -> Bool {
        uuids.isEmpty && rssi == nil && pathloss == nil && transport == scanType && !duplicateData && pattern == nil
    }

    private mutating func apply(_ key: String, _ value: DBusValue) -> Bool {
        switch (key, value) {
        case ("UUIDs", .array(_, let elements)):
            for element in elements {
                guard case .string(let text) = element, let uuid = BluetoothText.uuid(text) else { return false }
                if !uuids.contains(uuid) { uuids.append(uuid) }
            }
        case ("RSSI", .int16(let value)):
            guard (-127...20).contains(value) else { return false }
            rssi = value
        case ("Pathloss", .uint16(let value)):
            guard value <= 137 else { return false }
            pathloss = value
        case ("Transport", .string(let value)):
            switch value {
            case "auto": transport = Self.auto
            case "bredr": transport = Self.bredr
            case "le": transport = Self.le
            default: return false
            }
        case ("DuplicateData", .bool(let value)): duplicateData = value
        case ("Discoverable", .bool(let value)): discoverable = value
        case ("Pattern", .string(let value)): pattern = value
        default: return false
        }
        return true
    }
}
