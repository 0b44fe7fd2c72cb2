import DBus
import Synchronization

/// An `AdvertisementMonitor1` object of ours, under a root of its own that serves
/// `ObjectManager`, for `AdvertisementMonitorManager1.RegisterMonitor`
/// (doc/org.bluez.AdvertisementMonitor.rst).
///
/// bluetoothd reads the monitor through the root's `GetManagedObjects`, then calls `Activate`
/// (or `Release` when it refuses the monitor), `DeviceFound` and `DeviceLost` with the device's
/// object, and `Release` when it drops the monitor. Only bluetoothd may call it; the calls
/// arrive on the connection's queue and become ``Event``s there.
package final class BlueZAdvertisementMonitor: Sendable {
    /// One `or_patterns` entry: `content` at `offset` in the data of AD structures of type `adType`.
    package struct Pattern: Sendable, Hashable {
        package var offset: UInt8
        package var adType: UInt8
        package var content: [UInt8]

        package init(offset: UInt8, adType: UInt8, content: [UInt8]) {
            self.offset = offset
            self.adType = adType
            self.content = content
        }
    }

    /// The monitor's properties, in BlueZ's terms; nil leaves a property out (bluetoothd's "unset").
    package struct Configuration: Sendable, Hashable {
        package var patterns: [Pattern]
        /// `RSSIHighThreshold`, dBm (-127…20).
        package var rssiHighThreshold: Int16?
        /// `RSSIHighTimeout`, seconds (1…300).
        package var rssiHighTimeout: UInt16?
        /// `RSSILowThreshold`, dBm (-127…20).
        package var rssiLowThreshold: Int16?
        /// `RSSILowTimeout`, seconds (1…300).
        package var rssiLowTimeout: UInt16?
        /// `RSSISamplingPeriod`, in units of 100 ms (0 every packet, 255 the first only).
        package var rssiSamplingPeriod: UInt16?

        package init(
            patterns: [Pattern], rssiHighThreshold: Int16? = nil, rssiHighTimeout: UInt16? = nil,
            rssiLowThreshold: Int16? = nil, rssiLowTimeout: UInt16? = nil, rssiSamplingPeriod: UInt16? = nil
        ) {
            self.patterns = patterns
            self.rssiHighThreshold = rssiHighThreshold
            self.rssiHighTimeout = rssiHighTimeout
            self.rssiLowThreshold = rssiLowThreshold
            self.rssiLowTimeout = rssiLowTimeout
            self.rssiSamplingPeriod = rssiSamplingPeriod
        }
    }

    /// What bluetoothd tells the monitor.
    package enum Event: Sendable, Hashable {
        /// `Activate`: the monitor runs; devices follow.
        case activated
        /// `Release`: bluetoothd refused the monitor or dropped it.
        case released
        /// `DeviceFound`: an advertisement of this device matched.
        case deviceFound(BlueZClient.DeviceID)
        /// `DeviceLost`: the device went out of range (RSSI low threshold and timeout).
        case deviceLost(BlueZClient.DeviceID)
    }

    private static let nextNumber = Atomic<Int>(0)
    let connection: DBusConnection
    /// The root registered with `RegisterMonitor`.
    let root: ObjectPath
    let path: ObjectPath

    /// Exports the root (with `ObjectManager`) and the monitor below it; nothing is registered
    /// yet. `events` runs on the connection's queue.
    package init(
        client: BlueZClient, configuration: Configuration, events: @escaping @Sendable (Event) -> Void
    ) async throws(BlueZError) {
        connection = client.connection
        let number = Self.nextNumber.add(1, ordering: .relaxed).oldValue
        do throws(DBusError) {
            root = try ObjectPath("/org/bluezkit/monitor\(number)")
            path = try ObjectPath("/org/bluezkit/monitor\(number)/monitor0")
        } catch {
            throw BlueZError(error)
        }
        let interface = DBusInterface(
            BlueZNames.advertisementMonitor,
            methods: [
                DBusMethod("Release") { invocation in
                    invocation.reply()
                    events(.released)
                },
                DBusMethod("Activate") { invocation in
                    invocation.reply()
                    events(.activated)
                },
                DBusMethod("DeviceFound", in: "o") { invocation in
                    invocation.reply()
                    if let device = Self.device(invocation) { events(.deviceFound(device)) }
                },
                DBusMethod("DeviceLost", in: "o") { invocation in
                    invocation.reply()
                    if let device = Self.device(invocation) { events(.deviceLost(device)) }
                },
            ],
            properties: Self.properties(configuration))
        do throws(DBusError) {
            try await connection.addObjectManager(at: root, allowedCaller: BlueZNames.service)
            try await connection.export([interface], at: path, allowedCaller: BlueZNames.service)
        } catch {
            connection.removeObjectManager(at: root)
            throw BlueZError(error)
        }
    }

    private static func device(_ invocation: DBusMethodInvocation) -> BlueZClient.DeviceID? {
        guard let path = (try? invocation.arguments())?.first?.objectPathValue else { return nil }
        return BlueZClient.DeviceID(path: path)
    }

    /// `Type` and `Patterns`, and the RSSI properties that are set.
    static func properties(_ configuration: Configuration) -> [DBusProperty] {
        let patterns = configuration.patterns.map { pattern in
            DBusValue.structure([.byte(pattern.offset), .byte(pattern.adType), .bytes(pattern.content)])
        }
        var properties = [
            DBusProperty("Type", "s", get: { .string("or_patterns") }),
            DBusProperty("Patterns", "a(yyay)", get: { .array(element: "(yyay)", patterns) }),
        ]
        if let value = configuration.rssiHighThreshold {
            properties.append(DBusProperty("RSSIHighThreshold", "n", get: { .int16(value) }))
        }
        if let value = configuration.rssiHighTimeout {
            properties.append(DBusProperty("RSSIHighTimeout", "q", get: { .uint16(value) }))
        }
        if let value = configuration.rssiLowThreshold {
            properties.append(DBusProperty("RSSILowThreshold", "n", get: { .int16(value) }))
        }
        if let value = configuration.rssiLowTimeout {
            properties.append(DBusProperty("RSSILowTimeout", "q", get: { .uint16(value) }))
        }
        if let value = configuration.rssiSamplingPeriod {
            properties.append(DBusProperty("RSSISamplingPeriod", "q", get: { .uint16(value) }))
        }
        return properties
    }

    /// `AdvertisementMonitorManager1.RegisterMonitor` of the root on `adapter`.
    package func register(on adapter: BlueZClient.AdapterID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: adapter.path, interface: BlueZNames.advertisementMonitorManager,
                member: "RegisterMonitor", arguments: [.objectPath(root)])
        }
    }

    /// `UnregisterMonitor` (when registered on `adapter`), then removes the objects.
    package func unregister(from adapter: BlueZClient.AdapterID?) async {
        if let adapter {
            do throws(DBusError) {
                _ = try await connection.call(
                    destination: BlueZNames.service, path: adapter.path,
                    interface: BlueZNames.advertisementMonitorManager, member: "UnregisterMonitor",
                    arguments: [.objectPath(root)])
            } catch {
                BlueZLog.debug("UnregisterMonitor: \(error)")
            }
        }
        connection.unexport(path)
        connection.removeObjectManager(at: root)
    }
}
