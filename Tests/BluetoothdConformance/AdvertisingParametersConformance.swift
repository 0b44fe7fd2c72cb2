import DBus
public import Testing

/// How bluetoothd takes an advertisement's parameters (`src/advertising.c`) on a controller
/// without extended advertising (btvirt's, the simulator's default), started with
/// `--experimental` as the guest's is (the simulator with `advertisementMonitor`):
/// `LEAdvertisingManager1` shows `SupportedCapabilities` (`MaxAdvLen` 31) and `SupportedFeatures`
/// without "CanSetTxPower", and no `SupportedSecondaryChannels`; `RegisterAdvertisement` takes
/// an interval range, and answers `org.bluez.Error.Failed` for a minimum alone (the maximum stays
/// 0), an interval below 20 ms, a minimum above the maximum, a TX power above 20 dBm and any
/// `SecondaryChannel`.
public enum AdvertisingParametersConformance {
    static let interface = "org.bluez.LEAdvertisingManager1"

    /// Runs the checks on the adapter under test (nothing else advertising there).
    public static func run(_ bluetoothd: BluetoothdUnderTest, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.advertising")
        defer { client.close() }
        let capabilities = await client.property(bluetoothd.adapterPath, interface, "SupportedCapabilities")?
            .stringKeyedDictionary
        #expect(
            capabilities?["MaxAdvLen"]?.byteValue == 31,
            "\(bluetoothd): SupportedCapabilities \(String(describing: capabilities))",
            sourceLocation: sourceLocation)
        let features = await client.property(bluetoothd.adapterPath, interface, "SupportedFeatures")?.stringArrayValue
        #expect(
            features?.contains("CanSetTxPower") == false,
            "\(bluetoothd): SupportedFeatures \(String(describing: features))",
            sourceLocation: sourceLocation)
        let channels = await client.property(bluetoothd.adapterPath, interface, "SupportedSecondaryChannels")
        #expect(
            channels == nil, "\(bluetoothd): SupportedSecondaryChannels \(String(describing: channels))",
            sourceLocation: sourceLocation)

        let cases: [(String, [String: DBusValue], Bool)] = [
            ("an interval range", ["MinInterval": .uint32(100), "MaxInterval": .uint32(150)], true),
            ("a minimum alone", ["MinInterval": .uint32(100)], false),
            ("an interval below 20 ms", ["MinInterval": .uint32(10), "MaxInterval": .uint32(100)], false),
            ("a minimum above the maximum", ["MinInterval": .uint32(200), "MaxInterval": .uint32(100)], false),
            ("a TX power above 20 dBm", ["TxPower": .int16(30)], false),
            ("a 2M secondary channel", ["SecondaryChannel": .string("2M")], false),
        ]
        for (number, (name, properties, taken)) in cases.enumerated() {
            let path = try ObjectPath("/conformance/advertising\(number)")
            var exported = [
                DBusProperty("Type", "s", get: { .string("peripheral") }),
                DBusProperty("ServiceUUIDs", "as", get: { .stringArray([ConformanceApplication.service]) }),
            ]
            for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
                exported.append(DBusProperty(key, value.signature, get: { value }))
            }
            try await client.connection.export(
                [
                    DBusInterface(
                        "org.bluez.LEAdvertisement1", methods: [DBusMethod("Release") { $0.reply() }],
                        properties: exported)
                ], at: path)
            let error = await client.error(
                bluetoothd.adapterPath, interface, "RegisterAdvertisement",
                [.objectPath(path), .stringVariantDictionary([:])])
            if taken {
                #expect(
                    error == nil, "\(bluetoothd), \(name): \(String(describing: error))", sourceLocation: sourceLocation
                )
                _ = await client.error(
                    bluetoothd.adapterPath, interface, "UnregisterAdvertisement", [.objectPath(path)])
            } else {
                #expect(
                    error?.name == "org.bluez.Error.Failed", "\(bluetoothd), \(name): \(String(describing: error))",
                    sourceLocation: sourceLocation)
            }
            client.connection.unexport(path)
        }
    }
}
