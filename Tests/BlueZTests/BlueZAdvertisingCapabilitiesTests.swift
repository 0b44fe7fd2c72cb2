import BlueZ
import DBus
import Testing

/// `LEAdvertisingManager1`'s properties as bluetoothd sends them, read into what the peripheral
/// manager checks advertising options against.
@Suite struct BlueZAdvertisingCapabilitiesTests {
    static func capabilities(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(key: "s", value: "v", entries.map { .init(.string($0.0), .variant($0.1)) })
    }

    @Test func anExtendedControllerOnBluetoothd582() {
        let read = BlueZAdvertisingCapabilities(properties: [
            "SupportedIncludes": .stringArray(["tx-power", "appearance", "local-name"]),
            "SupportedSecondaryChannels": .stringArray(["1M", "2M", "Coded"]),
            "SupportedFeatures": .stringArray(["CanSetTxPower", "HardwareOffload"]),
            "SupportedCapabilities": Self.capabilities([
                ("MinTxPower", .int16(-20)), ("MaxTxPower", .int16(10)), ("MaxAdvLen", .byte(251)),
                ("MaxScnRspLen", .byte(251)),
            ]),
        ])
        #expect(read.secondaryChannels == ["1M", "2M", "Coded"])
        #expect(read.includes.contains("tx-power"))
        #expect(read.canSetTxPower)
        #expect(read.honoursParameters)
        #expect(read.minimumTxPower == -20)
        #expect(read.maximumTxPower == 10)
        #expect(read.maximumAdvertisingLength == 251)
        #expect(read.maximumScanResponseLength == 251)
    }

    /// bluetoothd 5.66 without `-E`: no `SupportedFeatures` or `SupportedCapabilities`, and
    /// intervals and TX power would be ignored.
    @Test func bluetoothd566WithoutExperimental() {
        let read = BlueZAdvertisingCapabilities(properties: [
            "SupportedIncludes": .stringArray(["tx-power"]),
            "SupportedSecondaryChannels": .stringArray(["1M", "2M"]),
        ])
        #expect(!read.honoursParameters)
        #expect(!read.canSetTxPower)
        #expect(read.features == nil)
        #expect(read.secondaryChannels == ["1M", "2M"])
    }

    /// Values of the wrong type count as absent: nothing traps, nothing is assumed.
    @Test func wrongTypesAreAbsent() {
        let read = BlueZAdvertisingCapabilities(properties: [
            "SupportedSecondaryChannels": .string("2M"),
            "SupportedFeatures": .uint32(1),
            "SupportedCapabilities": Self.capabilities([("MaxAdvLen", .uint16(251)), ("MinTxPower", .byte(3))]),
        ])
        #expect(read.secondaryChannels.isEmpty)
        #expect(!read.canSetTxPower)
        #expect(read.maximumAdvertisingLength == nil)
        #expect(read.minimumTxPower == nil)
        // The dictionary itself is there: bluetoothd parses the parameters.
        #expect(read.honoursParameters)
    }
}
