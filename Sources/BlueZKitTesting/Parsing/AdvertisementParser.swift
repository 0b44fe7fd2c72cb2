internal import DBus

/// Parses `LEAdvertisement1` properties as bluetoothd 5.66 does (`parse_advertisement` in `src/advertising.c`).
enum AdvertisementParser {
    /// The `Includes` values bluetoothd knows and the simulated controller supports.
    static let supportedIncludes = ["tx-power", "appearance", "local-name"]

    /// The advertisement, or nil when a property does not parse (bluetoothd then answers
    /// `Failed` "Failed to parse advertisement."). Properties bluetoothd ignores without
    /// `--experimental` (intervals and `TxPower` before 5.77) and the ones not simulated (`Data`,
    /// `Duration`, `DiscoverableTimeout`…) are skipped.
    ///
    /// `honoursParameters`: whether `MinInterval`, `MaxInterval` and `TxPower` are parsed (5.77
    /// and later, or `--experimental`); `secondaryChannels`: the controller's
    /// `SupportedSecondaryChannels` (`parse_secondary` refuses any other).
    static func parse(
        _ properties: [String: DBusValue], owner: String, path: ObjectPath, honoursParameters: Bool = false,
        secondaryChannels: [String] = []
    ) -> SimulatedAdvertisement? {
        var advertisement = SimulatedAdvertisement(
            owner: owner, path: path.rawValue, type: "peripheral", serviceUUIDs: [], solicitUUIDs: [],
            manufacturerData: [:],
            serviceData: [:], localName: nil, includes: [], appearance: nil, discoverable: nil, timeout: nil)
        if let value = properties["Type"] {
            guard let type = value.stringValue, type == "peripheral" || type == "broadcast" else { return nil }
            advertisement.type = type
        }
        if let value = properties["ServiceUUIDs"] {
            guard let parsed = uuids(value) else { return nil }
            (advertisement.serviceUUIDs, advertisement.serviceUUIDSizes) = parsed
        }
        if let value = properties["SolicitUUIDs"] {
            guard let parsed = uuids(value) else { return nil }
            (advertisement.solicitUUIDs, advertisement.solicitUUIDSizes) = parsed
        }
        if let value = properties["ManufacturerData"] {
            guard let entries = value.dictionaryEntries else { return nil }
            for entry in entries {
                guard let company = entry.key.uint16Value, case .variant(.bytes(let bytes)) = entry.value else {
                    return nil
                }
                advertisement.manufacturerData[company] = bytes
            }
        }
        if let value = properties["ServiceData"] {
            guard let entries = value.dictionaryEntries else { return nil }
            for entry in entries {
                guard let text = entry.key.stringValue, let uuid = BluetoothText.uuid(text),
                    case .variant(.bytes(let bytes)) = entry.value
                else { return nil }
                advertisement.serviceData[uuid] = bytes
            }
        }
        if let value = properties["Includes"] {
            guard let includes = value.stringArrayValue else { return nil }
            advertisement.includes = includes.filter(supportedIncludes.contains)
        }
        if let value = properties["LocalName"] {
            guard let name = value.stringValue, !advertisement.includes.contains("local-name") else { return nil }
            advertisement.localName = name.isEmpty ? nil : name
        }
        if let value = properties["Appearance"] {
            guard let appearance = value.uint16Value, !advertisement.includes.contains("appearance") else { return nil }
            advertisement.appearance = appearance
        }
        if let value = properties["Discoverable"] {
            guard let discoverable = value.boolValue else { return nil }
            advertisement.discoverable = discoverable
        }
        if let value = properties["Timeout"] {
            guard let seconds = value.uint16Value else { return nil }
            advertisement.timeout = seconds == 0 ? nil : seconds
        }
        // A broadcaster shall not set the discoverable flags (Core 5.0, Vol 3, Part C).
        if advertisement.type == "broadcast" && advertisement.discoverable == true { return nil }
        if let value = properties["SecondaryChannel"] {
            guard let channel = value.stringValue, secondaryChannels.contains(channel) else { return nil }
            advertisement.secondaryChannel = channel
        }
        guard honoursParameters else { return advertisement }
        return parseParameters(properties, into: advertisement)
    }

    /// `parse_min_interval`, `parse_max_interval`, `parse_tx_power` and the check that the
    /// minimum is not above the maximum (both 0 when absent: a minimum alone is refused).
    private static func parseParameters(
        _ properties: [String: DBusValue], into advertisement: SimulatedAdvertisement
    ) -> SimulatedAdvertisement? {
        var advertisement = advertisement
        var units: [String: UInt32] = [:]
        for name in ["MinInterval", "MaxInterval"] {
            guard let value = properties[name] else { continue }
            // Milliseconds to units of 0.625 ms, truncated, within 0x20...0xFFFFFF.
            guard let milliseconds = value.uint32Value else { return nil }
            let unit = UInt64(milliseconds) * 8 / 5
            guard (0x20...0xFF_FFFF).contains(unit) else { return nil }
            units[name] = UInt32(unit)
            if name == "MinInterval" { advertisement.minimumInterval = milliseconds }
            if name == "MaxInterval" { advertisement.maximumInterval = milliseconds }
        }
        if let value = properties["TxPower"] {
            guard let power = value.int16Value, (-127...20).contains(power) else { return nil }
            advertisement.txPower = power
        }
        guard units["MinInterval", default: 0] <= units["MaxInterval", default: 0] else { return nil }
        return advertisement
    }

    /// An `as` of UUIDs: their 128-bit forms and their sizes as written (2, 4 or 16 bytes).
    private static func uuids(_ value: DBusValue) -> ([String], [Int])? {
        guard let texts = value.stringArrayValue else { return nil }
        var uuids: [String] = []
        var sizes: [Int] = []
        for text in texts {
            guard let uuid = BluetoothText.uuid(text) else { return nil }
            uuids.append(uuid)
            let digits = text.hasPrefix("0x") || text.hasPrefix("0X") ? text.count - 2 : text.count
            sizes.append(digits == 4 ? 2 : digits == 8 ? 4 : 16)
        }
        return (uuids, sizes)
    }
}
