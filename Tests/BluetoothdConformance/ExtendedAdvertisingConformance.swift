import DBus
public import Testing

/// What bluetoothd shows and takes for a controller with extended advertising (Bumble's in the
/// guest, the simulator's `extendedAdvertising` adapter), started with `--experimental`:
/// `SupportedSecondaryChannels` 1M, 2M and Coded, `SupportedFeatures` with "CanSetTxPower",
/// `SupportedCapabilities` with a TX power range and `MaxAdvLen` (the kernel's number: 251 for
/// Bumble's controller on 5.66 too, which still refuses more than 31 bytes), and an advertisement with an interval, a TX power and a 2M secondary
/// channel taken.
public enum ExtendedAdvertisingConformance {
    static let interface = "org.bluez.LEAdvertisingManager1"

    /// Runs the checks on the adapter under test; `maximumLength` is the `MaxAdvLen` expected,
    /// `takesLongData` whether 104 bytes of advertising data are taken.
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, maximumLength: UInt8, takesLongData: Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.extended")
        defer { client.close() }
        let channels = await client.property(bluetoothd.adapterPath, interface, "SupportedSecondaryChannels")?
            .stringArrayValue
        #expect(
            channels == ["1M", "2M", "Coded"], "\(bluetoothd): \(String(describing: channels))",
            sourceLocation: sourceLocation)
        let features = await client.property(bluetoothd.adapterPath, interface, "SupportedFeatures")?.stringArrayValue
        #expect(
            features?.contains("CanSetTxPower") == true, "\(bluetoothd): \(String(describing: features))",
            sourceLocation: sourceLocation)
        let capabilities = await client.property(bluetoothd.adapterPath, interface, "SupportedCapabilities")?
            .stringKeyedDictionary
        print("\(bluetoothd) extended controller: SupportedCapabilities \(String(describing: capabilities))")
        #expect(
            capabilities?["MaxAdvLen"]?.byteValue == maximumLength,
            "\(bluetoothd): \(String(describing: capabilities))",
            sourceLocation: sourceLocation)
        let power = (capabilities?["MinTxPower"]?.int16Value, capabilities?["MaxTxPower"]?.int16Value)
        #expect(
            power.0 != nil && power.1 != nil && power.0! <= power.1!, "\(bluetoothd): TX power range \(power)",
            sourceLocation: sourceLocation)

        let path = try ObjectPath("/conformance/extended0")
        let properties: [(String, DBusValue)] = [
            ("Type", .string("peripheral")), ("ServiceUUIDs", .stringArray([ConformanceApplication.service])),
            ("MinInterval", .uint32(100)), ("MaxInterval", .uint32(150)), ("TxPower", .int16(-4)),
            ("SecondaryChannel", .string("2M")),
        ]
        try await client.connection.export(
            [
                DBusInterface(
                    "org.bluez.LEAdvertisement1", methods: [DBusMethod("Release") { $0.reply() }],
                    properties: properties.map { name, value in DBusProperty(name, value.signature, get: { value }) })
            ], at: path)
        let error = await client.error(
            bluetoothd.adapterPath, interface, "RegisterAdvertisement",
            [.objectPath(path), .stringVariantDictionary([:])])
        #expect(error == nil, "\(bluetoothd): \(String(describing: error))", sourceLocation: sourceLocation)
        _ = await client.error(bluetoothd.adapterPath, interface, "UnregisterAdvertisement", [.objectPath(path)])
        client.connection.unexport(path)

        // 100 bytes of manufacturer data: taken where bluetoothd sends longer data as extended
        // advertising (5.76, ea242fbf8), refused before.
        let long = try ObjectPath("/conformance/extended1")
        let data: DBusValue = .dictionary(
            key: "q", value: "v", [.init(.uint16(0xFFFF), .variant(.bytes([UInt8](repeating: 7, count: 100))))])
        try await client.connection.export(
            [
                DBusInterface(
                    "org.bluez.LEAdvertisement1", methods: [DBusMethod("Release") { $0.reply() }],
                    properties: [
                        DBusProperty("Type", "s", get: { .string("peripheral") }),
                        DBusProperty("ManufacturerData", data.signature, get: { data }),
                    ])
            ], at: long)
        let longError = await client.error(
            bluetoothd.adapterPath, interface, "RegisterAdvertisement",
            [.objectPath(long), .stringVariantDictionary([:])])
        if takesLongData {
            #expect(
                longError == nil, "\(bluetoothd), 104 bytes: \(String(describing: longError))",
                sourceLocation: sourceLocation)
        } else {
            #expect(
                longError?.name == "org.bluez.Error.Failed",
                "\(bluetoothd), 104 bytes: \(String(describing: longError))",
                sourceLocation: sourceLocation)
        }
        _ = await client.error(bluetoothd.adapterPath, interface, "UnregisterAdvertisement", [.objectPath(long)])
        client.connection.unexport(long)
    }
}
