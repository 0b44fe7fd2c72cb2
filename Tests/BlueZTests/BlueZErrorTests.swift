import BlueZ
import DBus
import Testing

/// The one conversion of D-Bus errors into BlueZ's codes (issue 19): the layer above acts on
/// codes and never compares an error name.
@Suite(.timeLimit(.minutes(5))) struct BlueZErrorTests {
    @Test(arguments: [
        ("org.bluez.Error.InProgress", BlueZError.Code.inProgress),
        ("org.bluez.Error.NotReady", .notReady), ("org.bluez.Error.NotConnected", .notConnected),
        ("org.bluez.Error.AlreadyExists", .alreadyExists), ("org.bluez.Error.Failed", .failed),
        ("org.bluez.Error.SomethingNew", .other),
        ("org.freedesktop.DBus.Error.AccessDenied", .accessDenied),
        ("org.freedesktop.DBus.Error.ServiceUnknown", .serviceAbsent),
        ("org.freedesktop.DBus.Error.NoReply", .noReply), ("org.freedesktop.DBus.Error.Timeout", .timeout),
        ("org.freedesktop.DBus.Error.UnknownObject", .unknownObject),
        ("org.freedesktop.DBus.Error.Disconnected", .disconnected), ("com.example.Odd", .other),
    ])
    func namesBecomeCodes(_ name: String, _ code: BlueZError.Code) {
        let error = BlueZError(DBusError(name: name, message: "m"))
        #expect(error.code == code)
        #expect(error.name == name && error.message == "m")
        #expect(error.underlying?.name == name)
    }

    @Test func everyCodeMadeHereReadsBackAsItself() {
        for code in BlueZError.Code.allCases where code != .other {
            let made = BlueZError(code, "m")
            #expect(BlueZError(made.dbusError).code == code, "\(code) → \(made.name)")
        }
    }

    @Test(arguments: [
        ("Operation failed with ATT error: 0x12", UInt8?.some(0x12)), ("ATT error: 0x0a", 0x0A),
        ("Operation failed with ATT error: 0xFE", 0xFE), ("ATT error: 0x", nil), ("ATT error: 0x123", nil),
        ("Not connected", nil),
    ])
    func theATTCodeInAMessage(_ message: String, _ expected: UInt8?) {
        #expect(BlueZError(name: "org.bluez.Error.Failed", message: message).attCode == expected)
    }
}

/// How much advertising data bluetoothd takes, from its properties (issue 17).
@Suite(.timeLimit(.minutes(5))) struct BlueZServerFeaturesTests {
    static let capabilities: [String: DBusValue] = [
        "SupportedCapabilities": .stringVariantDictionary(["MaxAdvLen": .byte(251), "MaxScnRspLen": .byte(251)])
    ]

    @Test func aNewerBluetoothdTakesWhatTheControllerTakes() {
        let features = BlueZServerFeatures(
            adapterProperties: ["Connectable": .bool(true)], advertisingProperties: Self.capabilities)
        #expect(features.maximumAdvertisingDataLength == 251)
    }

    @Test func bluetoothdBefore579IsHeldToALegacyAdvertisement() {
        // 5.66 reports the controller's length too, but sends longer data as a legacy advertisement.
        let features = BlueZServerFeatures(adapterProperties: [:], advertisingProperties: Self.capabilities)
        #expect(features.maximumAdvertisingDataLength == 31)
    }

    @Test func withoutTheCapabilitiesTheLimitIsALegacyAdvertisement() {
        let features = BlueZServerFeatures(adapterProperties: ["Connectable": .bool(true)])
        #expect(features.maximumAdvertisingDataLength == 31)
        #expect(BlueZServerFeatures.baseline.maximumAdvertisingDataLength == 31)
    }

    /// bluetoothd 5.87 dies on a discovery filter with UUIDs (BlueZ issue 2282): only its own
    /// Device ID, whatever the source, marks it; other versions, other IDs and none do not.
    @Test(arguments: [
        ("usb:v1D6Bp0246d0557", true), ("bluetooth:v1D6Bp0246d0557", true), ("usb:v1d6bp0246d0557", true),
        ("usb:v1D6Bp0246d0542", false), ("usb:v1D6Bp0246d0552", false), ("usb:v1D6Bp0246d0558", false),
        ("usb:v05ACp0246d0557", false), ("usb:v1D6Bp0247d0557", false), ("v1D6Bp0246d0557x", false),
        ("", false), ("usb:", false), (":", false),
    ])
    func onlyBluetoothd587LeavesUUIDsOutOfDiscoveryFilters(modalias: String, crashes: Bool) {
        let features = BlueZServerFeatures(adapterProperties: ["Modalias": .string(modalias)])
        #expect(features.uuidDiscoveryFilterCrashes == crashes)
    }

    @Test func withoutAModaliasNoBugIsAssumed() {
        #expect(!BlueZServerFeatures(adapterProperties: [:]).uuidDiscoveryFilterCrashes)
        #expect(!BlueZServerFeatures(adapterProperties: ["Modalias": .uint32(0x0557)]).uuidDiscoveryFilterCrashes)
        #expect(!BlueZServerFeatures.baseline.uuidDiscoveryFilterCrashes)
    }
}
