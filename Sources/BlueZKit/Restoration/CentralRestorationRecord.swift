import Foundation

/// What a central manager with a restore identifier saves on every change: the scan it
/// runs, and the peripherals it is connected to or has pending connections to, with the
/// services and characteristics discovered and which characteristics it is subscribed to
/// (what Core Bluetooth's restored-state keys carry).
///
/// Attribute and device tokens are BlueZ's names for them, kept opaque here; they stay valid
/// while the device's GATT database stays the same.
struct CentralRestorationRecord: RestorationRecord {
    struct Scan: Codable, Hashable, Sendable {
        /// Service UUIDs scanned for; nil for every peripheral.
        var services: [String]?
        var allowDuplicates: Bool
        var solicitedServiceUUIDs: [String]
        var rssiThreshold: Int?
        var pattern: String?
        /// A passive scan's patterns and thresholds (``ScanOptions/passive``); absent in records
        /// of active scans and in records written before passive scanning existed.
        var passive: Passive?
    }

    /// ``PassiveScan`` as saved.
    struct Passive: Codable, Hashable, Sendable {
        struct Pattern: Codable, Hashable, Sendable {
            var adType: UInt8
            var offset: Int
            var bytes: Data
        }

        struct Thresholds: Codable, Hashable, Sendable {
            var high: Int
            var highTimeout: Int
            var low: Int
            var lowTimeout: Int
            var samplingPeriod: Int?
        }

        var patterns: [Pattern]
        var thresholds: Thresholds?
    }

    struct Characteristic: Codable, Hashable, Sendable {
        var uuid: String
        var properties: UInt
        var token: String
        var isNotifying: Bool
    }

    struct Service: Codable, Hashable, Sendable {
        var uuid: String
        var isPrimary: Bool
        var token: String
        /// Nil when characteristics were never discovered.
        var characteristics: [Characteristic]?
    }

    struct Peripheral: Codable, Hashable, Sendable {
        var identifier: UUID
        var device: String
        var name: String?
        /// Nil when services were never discovered (or the link dropped since).
        var services: [Service]?
    }

    var scan: Scan?
    var peripherals: [Peripheral] = []

    var isEmpty: Bool { scan == nil && peripherals.isEmpty }
}

extension CentralRestorationRecord.Scan {
    init(services: [BluetoothUUID]?, options: ScanOptions) {
        self.services = services.map { $0.map(\.uuidString) }
        allowDuplicates = options.allowDuplicates
        solicitedServiceUUIDs = options.solicitedServiceUUIDs.map(\.uuidString)
        rssiThreshold = options.rssiThreshold
        pattern = options.pattern
        passive = options.passive.map { scan in
            CentralRestorationRecord.Passive(
                patterns: scan.patterns.map { .init(adType: $0.adType, offset: $0.offset, bytes: $0.bytes) },
                thresholds: scan.rssiThresholds.map {
                    .init(
                        high: $0.highThreshold, highTimeout: $0.highTimeout, low: $0.lowThreshold,
                        lowTimeout: $0.lowTimeout, samplingPeriod: $0.samplingPeriod)
                })
        }
    }

    /// The saved passive scan; nil for an active one, or when the saved values are no longer valid.
    private var passiveScan: PassiveScan? {
        guard let passive else { return nil }
        return try? PassiveScan(
            patterns: passive.patterns.map {
                try AdvertisementPattern(adType: $0.adType, offset: $0.offset, bytes: $0.bytes)
            },
            rssiThresholds: passive.thresholds.map {
                try RSSIThresholds(
                    highThreshold: $0.high, highTimeout: $0.highTimeout, lowThreshold: $0.low,
                    lowTimeout: $0.lowTimeout, samplingPeriod: $0.samplingPeriod)
            })
    }

    /// The scan's service UUIDs (unparsable ones left out).
    var serviceUUIDs: [BluetoothUUID]? { services.map { $0.compactMap(BluetoothUUID.init(parsing:)) } }

    /// The scan's options.
    var options: ScanOptions {
        ScanOptions(
            allowDuplicates: allowDuplicates,
            solicitedServiceUUIDs: solicitedServiceUUIDs.compactMap(BluetoothUUID.init(parsing:)),
            rssiThreshold: rssiThreshold, pattern: pattern, passive: passiveScan)
    }

    /// Core Bluetooth's scan option dictionary for `CBCentralManagerRestoredStateScanOptionsKey`.
    var optionsDictionary: [String: Any] {
        var dictionary: [String: Any] = [CBCentralManagerScanOptionAllowDuplicatesKey: NSNumber(value: allowDuplicates)]
        if !solicitedServiceUUIDs.isEmpty {
            dictionary[CBCentralManagerScanOptionSolicitedServiceUUIDsKey] = options.solicitedServiceUUIDs
        }
        if let passiveScan { dictionary[BlueZKitScanOptionPassiveKey] = passiveScan }
        return dictionary
    }
}
