public import Foundation

/// Linux: a passive scan, set as ``ScanOptions/passive``: the adapter listens to advertisements
/// without sending scan requests, and only peripherals whose advertisement matches one of
/// ``patterns`` are reported.
///
/// BlueZ does this with an advertisement monitor (`org.bluez.AdvertisementMonitor1` of type
/// `or_patterns`, registered with `AdvertisementMonitorManager1.RegisterMonitor`), which
/// bluetoothd offers only when it runs with `--experimental` (`-E`); without it, the scan fails
/// with ``BluetoothError/Code/advertisementMonitorUnavailable``. Discoveries arrive as with an
/// active scan, through ``CentralManagerDelegate/centralManager(_:didDiscover:advertisementData:rssi:)-(_,_,[String:Any],_)``
/// on the manager's queue. A passive scan receives no scan responses: a name that a peripheral
/// sends only in its scan response (where bluetoothd puts a long local name) is not seen.
///
/// ```swift
/// let scan = try PassiveScan(patterns: [.manufacturerData(companyIdentifier: 0xFFFF, prefix: Data([0x70, 0x74]))])
/// central.scanForPeripherals(withServices: nil, options: ScanOptions(passive: scan))
/// ```
public struct PassiveScan: Sendable, Hashable {
    /// The patterns; a peripheral is reported when its advertisement matches any of them.
    public let patterns: [AdvertisementPattern]
    /// When a matching peripheral counts as in range and as lost; nil reports every match.
    public let rssiThresholds: RSSIThresholds?

    /// A passive scan for advertisements that match any of `patterns`.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidParameters`` when
    ///   `patterns` is empty (bluetoothd refuses a monitor without patterns).
    public init(patterns: [AdvertisementPattern], rssiThresholds: RSSIThresholds? = nil) throws(BluetoothError) {
        guard !patterns.isEmpty else {
            throw BluetoothError(.invalidParameters, message: "A passive scan needs at least one pattern.")
        }
        self.patterns = patterns
        self.rssiThresholds = rssiThresholds
    }
}

/// Linux: bytes to look for in one kind of advertising data field, for a ``PassiveScan``.
///
/// An advertisement matches when one of its AD structures has type ``adType`` and its data
/// holds ``bytes`` starting at ``offset`` (bluetoothd's `or_patterns`, whose patterns are
/// `(start_position, AD_data_type, content)`).
public struct AdvertisementPattern: Sendable, Hashable {
    /// The longest advertising data of a legacy advertisement, which bounds a pattern: 31 bytes.
    public static let maximumLength = 31

    /// The AD type (Bluetooth assigned numbers), such as `0xFF` for manufacturer data or `0x09`
    /// for the complete local name.
    public let adType: UInt8
    /// Where in the field's data the bytes start (0 is the first byte after the type).
    public let offset: Int
    /// The bytes to match.
    public let bytes: Data

    /// A pattern for `bytes` at `offset` in AD structures of type `adType`.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidParameters`` when
    ///   `bytes` is empty, `offset` is negative, `offset + bytes.count` exceeds 31 bytes
    ///   (``maximumLength``), or `adType` is one that bluetoothd rejects (below `0x01`, or above
    ///   `0x3D` and not `0xFF`; `ad_is_type_valid` in BlueZ's src/shared/ad.c).
    public init(adType: UInt8, offset: Int = 0, bytes: Data) throws(BluetoothError) {
        guard !bytes.isEmpty else {
            throw BluetoothError(.invalidParameters, message: "An advertisement pattern needs at least one byte.")
        }
        guard offset >= 0, offset + bytes.count <= Self.maximumLength else {
            throw BluetoothError(
                .invalidParameters,
                message:
                    "An advertisement pattern must lie within \(Self.maximumLength) bytes; this one has \(bytes.count) bytes at offset \(offset)."
            )
        }
        guard (0x01...0x3D).contains(adType) || adType == 0xFF else {
            throw BluetoothError(
                .invalidParameters,
                message: "BlueZ does not match AD type 0x\(String(adType, radix: 16)) in an advertisement pattern.")
        }
        self.adType = adType
        self.offset = offset
        self.bytes = bytes
    }

    /// A pattern for manufacturer data (AD type `0xFF`) of `companyIdentifier` that starts
    /// with `prefix`: the identifier's two little-endian bytes, then `prefix`, at offset 0 —
    /// the layout of Core Bluetooth's ``CBAdvertisementDataManufacturerDataKey`` value.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidParameters`` when the
    ///   pattern exceeds 31 bytes.
    public static func manufacturerData(companyIdentifier: UInt16, prefix: Data = Data()) throws(BluetoothError)
        -> AdvertisementPattern
    {
        try AdvertisementPattern(
            adType: 0xFF, bytes: Data([UInt8(companyIdentifier & 0xFF), UInt8(companyIdentifier >> 8)]) + prefix)
    }

    /// A pattern for a complete local name (AD type `0x09`) that starts with `prefix` (UTF-8).
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidParameters`` when the
    ///   prefix is empty or longer than 31 bytes.
    public static func localName(prefix: String) throws(BluetoothError) -> AdvertisementPattern {
        try AdvertisementPattern(adType: 0x09, bytes: Data(prefix.utf8))
    }
}

/// Linux: when a ``PassiveScan`` counts a matching peripheral as found and as lost, by its
/// signal strength (the monitor's `RSSIHighThreshold`, `RSSIHighTimeout`, `RSSILowThreshold`,
/// `RSSILowTimeout` and `RSSISamplingPeriod`).
///
/// A peripheral is found once its advertisements have been received at or above
/// ``highThreshold`` dBm for ``highTimeout`` seconds, and lost after ``lowTimeout`` seconds
/// without one at or above ``lowThreshold`` dBm; a lost peripheral is reported again when it is
/// found again. bluetoothd needs several advertisements in a row for this: with a controller
/// that reports a peripheral once per scan (duplicate filtering) or without an RSSI value
/// (127, as emulated controllers do), a peripheral may never count as found.
public struct RSSIThresholds: Sendable, Hashable {
    /// The weakest signal, in dBm, that counts toward being in range (-127…20).
    public let highThreshold: Int
    /// How long, in seconds, advertisements must stay at or above ``highThreshold`` (1…300).
    public let highTimeout: Int
    /// The weakest signal, in dBm, that keeps a peripheral in range (-127…20, at most ``highThreshold``).
    public let lowThreshold: Int
    /// How long, in seconds, without a signal at or above ``lowThreshold`` before a peripheral is lost (1…300).
    public let lowTimeout: Int
    /// How bluetoothd groups advertisements for the controller, in units of 100 ms: 0 passes
    /// every one, 255 only the first of each in-range period; nil leaves bluetoothd's default.
    /// bluetoothd hands it to the kernel only.
    public let samplingPeriod: Int?

    /// Thresholds and timeouts in bluetoothd's ranges.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidParameters`` when a value
    ///   is outside its range or `lowThreshold` is above `highThreshold` (bluetoothd would
    ///   refuse the monitor: `parse_rssi_and_timeout` in src/adv_monitor.c).
    public init(
        highThreshold: Int, highTimeout: Int = 10, lowThreshold: Int, lowTimeout: Int = 5, samplingPeriod: Int? = nil
    ) throws(BluetoothError) {
        let rssi = -127...20
        let timeout = 1...300
        guard rssi.contains(highThreshold), rssi.contains(lowThreshold), lowThreshold <= highThreshold else {
            throw BluetoothError(
                .invalidParameters,
                message: "RSSI thresholds must lie in -127…20 dBm with the low one at most the high one.")
        }
        guard timeout.contains(highTimeout), timeout.contains(lowTimeout) else {
            throw BluetoothError(.invalidParameters, message: "RSSI timeouts must lie in 1…300 seconds.")
        }
        if let samplingPeriod, !(0...255).contains(samplingPeriod) {
            throw BluetoothError(.invalidParameters, message: "The RSSI sampling period must lie in 0…255.")
        }
        self.highThreshold = highThreshold
        self.highTimeout = highTimeout
        self.lowThreshold = lowThreshold
        self.lowTimeout = lowTimeout
        self.samplingPeriod = samplingPeriod
    }
}
