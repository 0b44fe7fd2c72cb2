import DBus
import TestSupport
public import Testing

/// The first service discovery of a device bluetoothd had forgotten.
///
/// Once `ServicesResolved` is true, `GetManagedObjects` holds the device's services, and every
/// one of them is announced by an `InterfacesAdded`. The ORDER of the two is not fixed: gdbus
/// sends the pending signals at the end of the main loop's turn in the order the objects were
/// last touched (the device last: services first), but in the order they were first touched
/// whenever bluetoothd sends another message in that turn (the device's `UUIDs` change first:
/// `ServicesResolved` first). Both were seen on the real 5.82 (and `ServicesResolved` first on
/// 5.66). A client that waits for `ServicesResolved` must therefore read the objects (or make one
/// round trip) rather than count on the `InterfacesAdded` it has received; the simulator sends
/// `ServicesResolved` first, the order that catches a client that does not.
public enum GATTConformance {
    /// The Heart Rate service UUID the peer serves.
    public static let heartRate = "0000180d-0000-1000-8000-00805f9b34fb"
    /// The GAP (Generic Access) service UUID, which every peer's GATT server has.
    static let genericAccess = "00001800-0000-1000-8000-00805f9b34fb"

    /// Forgets `peer`, discovers it, connects, and checks the objects and the signals' order.
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.gatt")
        defer { client.close() }
        let (path, mark) = try await client.connectAfresh(to: peer, on: bluetoothd)
        try await client.waitForSignal(from: mark, "ServicesResolved true", timeout: .seconds(60)) {
            $0.changes(path, "org.bluez.Device1", "ServicesResolved", to: .bool(true))
        }
        // The services are there once it is true.
        let objects = try await client.managedObjects()
        let services = objects.filter { $0.key.hasPrefix(path + "/") && $0.value.contains("org.bluez.GattService1") }
        #expect(!services.isEmpty, "\(bluetoothd): no GattService1 under \(path)", sourceLocation: sourceLocation)
        let heartRateFound = await withTaskGroup(of: Bool.self) { group in
            for service in services.keys {
                group.addTask {
                    await client.property(service, "org.bluez.GattService1", "UUID") == .string(Self.heartRate)
                }
            }
            return await group.contains(true)
        }
        #expect(heartRateFound, "\(bluetoothd): the Heart Rate service is missing", sourceLocation: sourceLocation)
        // The GAP service, claimed by bluetoothd's gap plugin, is exported only from 5.80
        // (`[GATT] ExportClaimedServices`, read-only by default); before, `export_service` skips it.
        var gapFound = false
        for service in services.keys
        where await client.property(service, "org.bluez.GattService1", "UUID") == .string(Self.genericAccess) {
            gapFound = true
            // Read-only: a write to one of its characteristics is refused before any ATT request
            // (`src/gatt-client.c`: NotAuthorized for a claimed service under
            // `BT_GATT_EXPORT_READ_ONLY`, the default).
            if let characteristic = objects.keys.sorted().first(where: {
                $0.hasPrefix(service + "/") && objects[$0]?.contains("org.bluez.GattCharacteristic1") == true
            }) {
                let refusal = await client.error(
                    characteristic, "org.bluez.GattCharacteristic1", "WriteValue",
                    [.bytes([0x42]), .stringVariantDictionary([:])])
                #expect(
                    refusal?.name == "org.bluez.Error.NotAuthorized",
                    "\(bluetoothd): a write to the GAP service's \(characteristic): \(String(describing: refusal))",
                    sourceLocation: sourceLocation)
            }
        }
        let exportsClaimed = bluetoothd.version >= BluetoothdUnderTest.Version(5, 80)
        #expect(
            gapFound == exportsClaimed, "\(bluetoothd): the GAP service \(gapFound ? "exported" : "not exported")",
            sourceLocation: sourceLocation)

        // Signals: wait for the services' InterfacesAdded (they may follow), then compare.
        try await client.waitForSignal(from: mark, "a service's InterfacesAdded") {
            $0.adds("org.bluez.GattService1", under: path)
        }
        let signals = client.signals(since: mark)
        let resolvedIndex = signals.firstIndex {
            $0.changes(path, "org.bluez.Device1", "ServicesResolved", to: .bool(true))
        }
        let firstService = signals.firstIndex { $0.adds("org.bluez.GattService1", under: path) }
        if let resolvedIndex, let firstService {
            print("\(bluetoothd): ServicesResolved \(resolvedIndex < firstService ? "before" : "after") the services")
        }
        // Every service GetManagedObjects showed was announced.
        let announced = Set(signals.filter { $0.adds("org.bluez.GattService1", under: path) }.map(\.objectPath))
        #expect(
            Set(services.keys).isSubset(of: announced), "\(bluetoothd): announced \(announced), held \(services.keys)",
            sourceLocation: sourceLocation)

        _ = await client.error(path, "org.bluez.Device1", "Disconnect")
        try await client.waitForProperty(path, "org.bluez.Device1", "Connected", toBe: .bool(false))
        try await client.forgetDevice(path, on: bluetoothd)
    }
}
