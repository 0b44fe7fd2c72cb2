package import DBus

/// What the running bluetoothd does for a local GATT application and an advertisement, and a
/// bug of one release that a client must steer clear of, where BlueZ versions differ.
/// bluetoothd publishes no version on D-Bus, so features are read from properties that
/// appeared in the same or a later release. The one exception is a bug confined to one
/// release, which no property can tell: it is read from the adapter's `Modalias`, bluetoothd's
/// own Device ID, which carries its version unless `main.conf` sets `DeviceID`.
///
/// | feature | BlueZ | probe | limits |
/// | --- | --- | --- | --- |
/// | ``perDeviceNotifySockets`` | 5.69 one socket per device (8eb1dee87), 5.76 a write reaches that device only (a08ec1a4e) | `Adapter1.Connectable` (5.79) | 5.69–5.78 are taken for 5.66: one central's socket would reach every subscriber before 5.76, and 5.71's `Manufacturer` cannot tell 5.71–5.75 from 5.76 |
/// | confirmations on the socket | 5.80 (6b34b0551) | none: learned from the first `0x01` read from a socket | 5.79 sends none |
/// | ``extendedAdvertising`` | 5.76: data over 31 bytes goes out as extended advertising (ea242fbf8) | `Adapter1.Connectable` (5.79) | 5.76–5.78 are held to 31 bytes |
/// | ``uuidDiscoveryFilterCrashes`` | 5.87 only: `is_filter_match` passes `queue_find` its arguments in GLib's order and calls a filter's UUID string as a function, so bluetoothd dies (SIGSEGV) at the first advertisement listing services while any client's filter has `UUIDs` (91c340d35; fixed after 5.87 by 82af2beaf, BlueZ issue 2282) | `Adapter1.Modalias` is `…:v1D6Bp0246d0557` (Linux Foundation, BlueZ, 5.87) | a 5.87 whose `main.conf` sets its own `DeviceID` is not recognised; a distribution's 5.87 with the fix is treated as affected |
/// | ``maximumAdvertisingDataLength`` | the controller's limit, `LEAdvertisingManager1.SupportedCapabilities["MaxAdvLen"]` (experimental before 5.77) | that property | 31 (a legacy advertisement) where it is absent, or without ``extendedAdvertising`` |
package struct BlueZServerFeatures: Sendable, Hashable {
    /// bluetoothd asks a characteristic that has `NotifyAcquired` for one `AcquireNotify` socket per
    /// subscribing device (the `device` and `mtu` options say which), closes it when that device
    /// unsubscribes or its link ends, and sends what is written to it to that device only.
    /// Without it (5.66), the first subscriber's socket is shared by all and later subscribers
    /// are only counted, so the application must not offer `NotifyAcquired`.
    package var perDeviceNotifySockets: Bool
    /// Advertising data longer than a legacy advertisement's 31 bytes is sent as extended
    /// advertising where the controller supports it (`LEAdvertisingManager1`'s
    /// `SupportedFeatures`, checked separately).
    package var extendedAdvertising: Bool

    /// How many bytes of advertising data bluetoothd accepts (see
    /// ``BlueZAdvertisement/Content/advertisingDataLength``): 31, a legacy advertisement's size,
    /// unless bluetoothd sends longer data as extended advertising and the controller takes more.
    package var maximumAdvertisingDataLength: Int

    /// bluetoothd crashes when a discovery filter lists service UUIDs (5.87): `SetDiscoveryFilter`
    /// must go without them, and the client matches services itself.
    package var uuidDiscoveryFilterCrashes: Bool

    package init(
        perDeviceNotifySockets: Bool, extendedAdvertising: Bool, maximumAdvertisingDataLength: Int = 31,
        uuidDiscoveryFilterCrashes: Bool = false
    ) {
        self.perDeviceNotifySockets = perDeviceNotifySockets
        self.extendedAdvertising = extendedAdvertising
        self.maximumAdvertisingDataLength = maximumAdvertisingDataLength
        self.uuidDiscoveryFilterCrashes = uuidDiscoveryFilterCrashes
    }

    /// bluetoothd 5.87's default Device ID (`src/main.c`: source USB, vendor 0x1d6b, product
    /// 0x0246, version major << 8 | minor), as `Adapter1.Modalias` shows it after the source.
    static let bluez587DeviceID = "v1D6Bp0246d0557"

    /// A legacy advertisement's data: 31 bytes.
    package static let legacyAdvertisingDataLength = 31

    /// bluetoothd 5.66's behaviour: nothing of the above.
    package static let baseline = BlueZServerFeatures(perDeviceNotifySockets: false, extendedAdvertising: false)

    /// Reads the features from an adapter's `Adapter1` properties and, when given, its
    /// `LEAdvertisingManager1` properties.
    package init(
        adapterProperties properties: [String: DBusValue], advertisingProperties: [String: DBusValue]? = nil
    ) {
        // `Connectable` was added in 5.79 (17f485f20), after both 8eb1dee87 (5.69) and a08ec1a4e (5.76).
        let atLeast579 = properties["Connectable"] != nil
        var maximum = Self.legacyAdvertisingDataLength
        if atLeast579, let capabilities = advertisingProperties?["SupportedCapabilities"]?.stringKeyedDictionary,
            let reported = capabilities["MaxAdvLen"]?.byteValue
        {
            maximum = max(maximum, Int(reported))
        }
        // "usb:v1D6Bp0246d0557"; the source ("usb", "bluetooth") does not matter.
        let deviceID = properties["Modalias"]?.stringValue?.split(separator: ":", maxSplits: 1).last
        self.init(
            perDeviceNotifySockets: atLeast579, extendedAdvertising: atLeast579, maximumAdvertisingDataLength: maximum,
            uuidDiscoveryFilterCrashes: deviceID.map { $0.uppercased() == Self.bluez587DeviceID.uppercased() } ?? false)
    }
}
