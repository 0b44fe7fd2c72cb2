import DBus
import Synchronization

/// An `LEAdvertisement1` object of ours, registered with
/// `LEAdvertisingManager1.RegisterAdvertisement`. bluetoothd reads its
/// properties (`GetAll`) before it answers; only bluetoothd may call it.
package final class BlueZAdvertisement: Sendable {
    /// The advertisement's content, in BlueZ's terms.
    package struct Content: Sendable, Hashable {
        package var localName: String?
        /// 128-bit UUID strings.
        package var serviceUUIDs: [String]
        package var solicitUUIDs: [String]
        package var manufacturerData: [UInt16: [UInt8]]
        package var serviceData: [String: [UInt8]]
        package var appearance: UInt16?
        package var includeTxPower: Bool
        package var discoverable: Bool
        /// `MinInterval` and `MaxInterval` in milliseconds; both or neither (bluetoothd refuses an
        /// advertisement with only `MinInterval`: its maximum stays 0, below the minimum).
        package var interval: ClosedRange<UInt32>?
        /// `TxPower` in dBm.
        package var txPower: Int16?
        /// `SecondaryChannel`: "1M", "2M" or "Coded".
        package var secondaryChannel: String?

        package init(
            localName: String? = nil, serviceUUIDs: [String] = [], solicitUUIDs: [String] = [],
            manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [String: [UInt8]] = [:],
            appearance: UInt16? = nil, includeTxPower: Bool = false, discoverable: Bool = true,
            interval: ClosedRange<UInt32>? = nil, txPower: Int16? = nil, secondaryChannel: String? = nil
        ) {
            self.interval = interval
            self.txPower = txPower
            self.secondaryChannel = secondaryChannel
            self.localName = localName
            self.serviceUUIDs = serviceUUIDs
            self.solicitUUIDs = solicitUUIDs
            self.manufacturerData = manufacturerData
            self.serviceData = serviceData
            self.appearance = appearance
            self.includeTxPower = includeTxPower
            self.discoverable = discoverable
        }

        /// The advertising data this needs, counted as bluetoothd counts it against the
        /// adapter's `MaxAdvLen`: flags, UUID lists, service and manufacturer data, appearance,
        /// TX power (`refresh_legacy_adv` and `calc_max_adv_len` in src/advertising.c).
        ///
        /// The local name is not counted: in a legacy advertisement bluetoothd sends it in the
        /// scan response (`generate_scan_rsp`), in an extended one after the data (5.76 and
        /// later), and in both shortens it to what fits (`serialize_name` in src/shared/ad.c,
        /// which then marks it as a shortened name). A long name is never a reason to refuse.
        package var advertisingDataLength: Int {
            var length = discoverable ? 3 : 0
            let short = serviceUUIDs.filter { Self.isShort($0) }.count
            let long = serviceUUIDs.count - short
            if short > 0 { length += 2 + 2 * short }
            if long > 0 { length += 2 + 16 * long }
            // Solicitation lists (AD types 0x14 and 0x15), one field per width.
            let shortSolicit = solicitUUIDs.filter { Self.isShort($0) }.count
            let longSolicit = solicitUUIDs.count - shortSolicit
            if shortSolicit > 0 { length += 2 + 2 * shortSolicit }
            if longSolicit > 0 { length += 2 + 16 * longSolicit }
            for (_, bytes) in manufacturerData { length += 2 + 2 + bytes.count }
            for (uuid, bytes) in serviceData { length += 2 + (Self.isShort(uuid) ? 2 : 16) + bytes.count }
            if appearance != nil { length += 4 }
            if includeTxPower { length += 3 }
            return length
        }

        static func isShort(_ uuid: String) -> Bool {
            uuid.lowercased().hasPrefix("0000") && uuid.lowercased().hasSuffix("-0000-1000-8000-00805f9b34fb")
        }
    }

    private static let nextNumber = Atomic<Int>(0)
    let connection: DBusConnection
    let path: ObjectPath

    /// Exports the advertisement object on the client's connection; nothing is registered yet.
    package convenience init(
        client: BlueZClient, content: Content, onRelease: @escaping @Sendable () -> Void
    ) async throws(BlueZError) {
        try await self.init(connection: client.connection, content: content, onRelease: onRelease)
    }

    /// Exports the advertisement object; nothing is registered yet.
    /// `onRelease` runs when bluetoothd drops it (`Release`).
    init(connection: DBusConnection, content: Content, onRelease: @escaping @Sendable () -> Void)
        async throws(BlueZError)
    {
        self.connection = connection
        // A fresh path each time: the previous advertisement may still be on its way out.
        do throws(DBusError) {
            path = try ObjectPath("/org/bluezkit/advertisement\(Self.nextNumber.add(1, ordering: .relaxed).oldValue)")
        } catch {
            throw BlueZError(error)
        }
        let includes = content.includeTxPower ? ["tx-power"] : []
        var properties: [DBusProperty] = [
            DBusProperty("Type", "s", get: { .string("peripheral") }),
            DBusProperty("ServiceUUIDs", "as", get: { .stringArray(content.serviceUUIDs) }),
            DBusProperty("Discoverable", "b", get: { .bool(content.discoverable) }),
            DBusProperty("Includes", "as", get: { .stringArray(includes) }),
            DBusProperty(
                "ManufacturerData", "a{qv}",
                get: {
                    .dictionary(
                        key: "q", value: "v",
                        content.manufacturerData.sorted { $0.key < $1.key }.map {
                            .init(.uint16($0.key), .variant(.bytes($0.value)))
                        })
                }),
            DBusProperty(
                "ServiceData", "a{sv}",
                get: {
                    .dictionary(
                        key: "s", value: "v",
                        content.serviceData.sorted { $0.key < $1.key }.map {
                            .init(.string($0.key), .variant(.bytes($0.value)))
                        })
                }),
        ]
        if !content.solicitUUIDs.isEmpty {
            properties.append(DBusProperty("SolicitUUIDs", "as", get: { .stringArray(content.solicitUUIDs) }))
        }
        if let name = content.localName { properties.append(DBusProperty("LocalName", "s", get: { .string(name) })) }
        if let appearance = content.appearance {
            properties.append(DBusProperty("Appearance", "q", get: { .uint16(appearance) }))
        }
        if let interval = content.interval {
            properties.append(DBusProperty("MinInterval", "u", get: { .uint32(interval.lowerBound) }))
            properties.append(DBusProperty("MaxInterval", "u", get: { .uint32(interval.upperBound) }))
        }
        if let txPower = content.txPower { properties.append(DBusProperty("TxPower", "n", get: { .int16(txPower) })) }
        if let channel = content.secondaryChannel {
            properties.append(DBusProperty("SecondaryChannel", "s", get: { .string(channel) }))
        }
        let interface = DBusInterface(
            BlueZNames.advertisement,
            methods: [
                DBusMethod("Release") { invocation in
                    onRelease()
                    invocation.reply()
                }
            ],
            properties: properties)
        do throws(DBusError) {
            try await connection.export([interface], at: path, allowedCaller: BlueZNames.service)
        } catch {
            throw BlueZError(error)
        }
    }

    /// `LEAdvertisingManager1.RegisterAdvertisement` on `adapter`.
    package func register(on adapter: BlueZClient.AdapterID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: adapter.path, interface: BlueZNames.advertisingManager,
                member: "RegisterAdvertisement", arguments: [.objectPath(path), .stringVariantDictionary([:])])
        }
    }

    /// `UnregisterAdvertisement`, then removes the object.
    package func unregister(from adapter: BlueZClient.AdapterID?) async {
        if let adapter {
            _ = try? await connection.call(
                destination: BlueZNames.service, path: adapter.path, interface: BlueZNames.advertisingManager,
                member: "UnregisterAdvertisement", arguments: [.objectPath(path)])
        }
        connection.unexport(path)
    }
}
