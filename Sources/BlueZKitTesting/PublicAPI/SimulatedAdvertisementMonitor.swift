internal import DBus

/// An `org.bluez.AdvertisementMonitor1` object that the simulated bluetoothd accepted and
/// activated (``SimulatedAdapter/registeredMonitors``), as it read it.
///
/// The simulator matches it the way bluetoothd's software path does for a monitor without RSSI
/// thresholds: every advertisement of a peripheral in range that matches one of ``patterns``
/// makes bluetoothd create or update the device and call `DeviceFound` — with thresholds too
/// (they are validated, not applied), and without ever calling `DeviceLost`.
public struct SimulatedAdvertisementMonitor: Sendable, Hashable {
    /// One `or_patterns` entry: `content` at `offset` in the data of AD structures of `adType`.
    public struct Pattern: Sendable, Hashable {
        /// Where the content starts in the AD structure's data.
        public var offset: UInt8
        /// The AD type.
        public var adType: UInt8
        /// The bytes to match.
        public var content: [UInt8]
    }

    /// The unique bus name of the process that registered it.
    public var owner: String
    /// The monitor's object path (below the registered root).
    public var path: String
    /// `Patterns`.
    public var patterns: [Pattern]
    /// `RSSIHighThreshold`, when set.
    public var rssiHighThreshold: Int16?
    /// `RSSILowThreshold`, when set.
    public var rssiLowThreshold: Int16?
    /// `RSSIHighTimeout`, when set.
    public var rssiHighTimeout: UInt16?
    /// `RSSILowTimeout`, when set.
    public var rssiLowTimeout: UInt16?
    /// `RSSISamplingPeriod`, when set.
    public var rssiSamplingPeriod: UInt16?

    var objectPath: ObjectPath { (try? ObjectPath(path)) ?? .root }

    /// bluetoothd's checks (`monitor_process` in src/adv_monitor.c): `Type` `or_patterns`, at
    /// least one pattern each accepted by `bt_ad_pattern_new`, RSSI values of the right types and
    /// in range once the unset ones are filled in. Nil when bluetoothd would release it.
    static func parse(_ properties: [String: DBusValue], owner: String, path: String) -> Self? {
        guard properties["Type"]?.stringValue == "or_patterns", let entries = properties["Patterns"]?.arrayValue else {
            return nil
        }
        var patterns: [Pattern] = []
        for entry in entries {
            guard let fields = entry.structureFields, fields.count == 3, let offset = fields[0].byteValue,
                let adType = fields[1].byteValue, let content = fields[2].bytesValue,
                !content.isEmpty, offset < 31, content.count <= 31, Int(offset) + content.count <= 31,
                (0x01...0x3D).contains(adType) || adType == 0xFF
            else { return nil }
            patterns.append(Pattern(offset: offset, adType: adType, content: content))
        }
        guard !patterns.isEmpty else { return nil }
        var monitor = SimulatedAdvertisementMonitor(owner: owner, path: path, patterns: patterns)
        for (name, value) in properties where name.hasPrefix("RSSI") {
            switch name {
            case "RSSIHighThreshold":
                guard let v = value.int16Value else { return nil }
                monitor.rssiHighThreshold = v
            case "RSSILowThreshold":
                guard let v = value.int16Value else { return nil }
                monitor.rssiLowThreshold = v
            case "RSSIHighTimeout":
                guard let v = value.uint16Value else { return nil }
                monitor.rssiHighTimeout = v
            case "RSSILowTimeout":
                guard let v = value.uint16Value else { return nil }
                monitor.rssiLowTimeout = v
            case "RSSISamplingPeriod":
                guard let v = value.uint16Value else { return nil }
                monitor.rssiSamplingPeriod = v
            default: continue
            }
        }
        return monitor.rssiIsValid ? monitor : nil
    }

    /// `parse_rssi_and_timeout`: unset values (127 dBm, 0 s, 256) take defaults, then all must be in range.
    private var rssiIsValid: Bool {
        let high = rssiHighThreshold.flatMap { $0 == 127 ? nil : $0 }
        let low = rssiLowThreshold.flatMap { $0 == 127 ? nil : $0 }
        let highTimeout = rssiHighTimeout.flatMap { $0 == 0 ? nil : $0 }
        let lowTimeout = rssiLowTimeout.flatMap { $0 == 0 ? nil : $0 }
        let sampling = rssiSamplingPeriod.flatMap { $0 == 256 ? nil : $0 }
        if high == nil && low == nil && highTimeout == nil && lowTimeout == nil && sampling == nil { return true }
        let lowValue = low ?? -127
        let highValue = high ?? lowValue
        let range: ClosedRange<Int16> = -127...20
        let timeouts: ClosedRange<UInt16> = 1...300
        return range.contains(highValue) && range.contains(lowValue) && highValue >= lowValue
            && timeouts.contains(highTimeout ?? 10) && timeouts.contains(lowTimeout ?? 5) && (sampling ?? 0) <= 255
    }

    /// Whether an AD structure of a pattern's type holds its content at its offset.
    func matches(_ structures: AdvertisementStructures) -> Bool {
        patterns.contains { pattern in
            structures.fields.contains { field in
                let start = Int(pattern.offset)
                return field.type == pattern.adType && field.data.count >= start + pattern.content.count
                    && Array(field.data[start..<start + pattern.content.count]) == pattern.content
            }
        }
    }
}
