package import DBus

/// What an adapter's `LEAdvertisingManager1` says it can do with an advertisement's parameters
/// (doc/org.bluez.LEAdvertisingManager.rst): the secondary channels, whether each advertisement
/// may ask for its TX power, the TX power range and the most data it takes.
///
/// | property | BlueZ | without `--experimental` (`-E`) |
/// | --- | --- | --- |
/// | `SupportedSecondaryChannels` | every version; present only when the controller does extended advertising (`secondary_exists`) | present |
/// | `SupportedFeatures`, `SupportedCapabilities` | 5.56 (3e6157966, ced871671) | absent before 5.77 (7e028287a promoted them) |
///
/// bluetoothd parses an advertisement's `MinInterval`, `MaxInterval` and `TxPower` under the same
/// condition that shows `SupportedCapabilities` (before 5.77 only with `-E`; without it 5.66
/// ignores them without an error, `parse_min_interval` in src/advertising.c), so that property's
/// presence is the probe for ``honoursParameters``.
package struct BlueZAdvertisingCapabilities: Sendable, Hashable {
    /// `SupportedSecondaryChannels` ("1M", "2M", "Coded"); empty when absent (a legacy-only controller).
    package var secondaryChannels: [String]
    /// `SupportedIncludes` ("tx-power", "appearance", "local-name", "rsi"); empty when absent.
    package var includes: [String]
    /// `SupportedFeatures` ("CanSetTxPower", "HardwareOffload"); nil when absent.
    package var features: [String]?
    /// `SupportedCapabilities["MinTxPower"]` in dBm, when the controller reported it.
    package var minimumTxPower: Int16?
    /// `SupportedCapabilities["MaxTxPower"]` in dBm, when the controller reported it.
    package var maximumTxPower: Int16?
    /// `SupportedCapabilities["MaxAdvLen"]`, when present.
    package var maximumAdvertisingLength: Int?
    /// `SupportedCapabilities["MaxScnRspLen"]`, when present.
    package var maximumScanResponseLength: Int?
    /// Whether bluetoothd parses `MinInterval`, `MaxInterval` and `TxPower` (rather than ignoring
    /// them): `SupportedCapabilities` is present.
    package var honoursParameters: Bool

    /// Whether each advertisement may set its TX power (`SupportedFeatures` has "CanSetTxPower":
    /// the kernel's `MGMT_ADV_FLAG_CAN_SET_TX_POWER`, controllers with extended advertising).
    package var canSetTxPower: Bool { features?.contains("CanSetTxPower") == true }

    package init(
        secondaryChannels: [String] = [], includes: [String] = [], features: [String]? = nil,
        minimumTxPower: Int16? = nil,
        maximumTxPower: Int16? = nil, maximumAdvertisingLength: Int? = nil, maximumScanResponseLength: Int? = nil,
        honoursParameters: Bool = false
    ) {
        self.secondaryChannels = secondaryChannels
        self.includes = includes
        self.features = features
        self.minimumTxPower = minimumTxPower
        self.maximumTxPower = maximumTxPower
        self.maximumAdvertisingLength = maximumAdvertisingLength
        self.maximumScanResponseLength = maximumScanResponseLength
        self.honoursParameters = honoursParameters
    }

    /// Reads them from `LEAdvertisingManager1`'s properties; a value of the wrong type counts as absent.
    package init(properties: [String: DBusValue]) {
        let capabilities = properties["SupportedCapabilities"]?.stringKeyedDictionary
        self.init(
            secondaryChannels: properties["SupportedSecondaryChannels"]?.stringArrayValue ?? [],
            includes: properties["SupportedIncludes"]?.stringArrayValue ?? [],
            features: properties["SupportedFeatures"]?.stringArrayValue,
            minimumTxPower: capabilities?["MinTxPower"]?.int16Value,
            maximumTxPower: capabilities?["MaxTxPower"]?.int16Value,
            maximumAdvertisingLength: capabilities?["MaxAdvLen"]?.byteValue.map(Int.init),
            maximumScanResponseLength: capabilities?["MaxScnRspLen"]?.byteValue.map(Int.init),
            honoursParameters: capabilities != nil)
    }
}

extension BlueZClient {
    /// The current adapter's advertising capabilities (on the queue); nil without an adapter or
    /// an `LEAdvertisingManager1` on it.
    package var advertisingCapabilities: BlueZAdvertisingCapabilities? {
        guard let path = adapterPath, let properties = cache.properties(BlueZNames.advertisingManager, at: path) else {
            return nil
        }
        return BlueZAdvertisingCapabilities(properties: properties)
    }

    /// ``advertisingCapabilities`` from any thread (hops onto the queue).
    package func currentAdvertisingCapabilities() async -> BlueZAdvertisingCapabilities? {
        await withCheckedContinuation { continuation in
            connection.queue.async { continuation.resume(returning: self.advertisingCapabilities) }
        }
    }
}
