import DBus
import TestSupport
public import Testing

/// bluetoothd's battery plugin on a device with the Battery service (`180F`).
///
/// Once the link's services are resolved, bluetoothd reads Battery Level (`2A19`), writes its
/// CCCD on by itself, and exports `org.bluez.Battery1` on the device's object with `Percentage`
/// (0 to 100); the peer's notifications change `Percentage`; the interface goes with the link.
/// The plugin's subscription is not a D-Bus client's: the characteristic's `Notifying` stays
/// false. The Battery service itself is exported as a `GattService1` on every release (the
/// plugin counted as external before 5.80; from 5.80 claimed services are exported read-only).
public enum BatteryConformance {
    static let battery = "org.bluez.Battery1"
    static let batteryService = "0000180f-0000-1000-8000-00805f9b34fb"
    static let batteryLevel = "00002a19-0000-1000-8000-00805f9b34fb"

    /// Forgets `peer`, discovers it serving GATT (with a Battery service whose level notifies and
    /// falls while notified, as `example-gatt-server`'s does), connects, and follows `Battery1`
    /// until the link ends.
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.battery")
        defer { client.close() }
        let (path, mark) = try await client.connectAfresh(to: peer, on: bluetoothd)
        try await client.waitForSignal(from: mark, "Battery1 exported", timeout: .seconds(60)) {
            $0.member == "InterfacesAdded" && $0.objectPath == path && $0.addedInterfaces.contains(battery)
        }
        let signals = client.signals(since: mark)
        let resolved = signals.firstIndex { $0.changes(path, "org.bluez.Device1", "ServicesResolved", to: .bool(true)) }
        let added = signals.firstIndex { $0.member == "InterfacesAdded" && $0.addedInterfaces.contains(battery) }
        #expect(
            resolved != nil && added != nil && resolved! < added!,
            "\(bluetoothd): Battery1 before ServicesResolved: \(signals)", sourceLocation: sourceLocation)
        var first: UInt8?
        try await pollUntil("Percentage", timeout: .seconds(20)) {
            first = await client.property(path, battery, "Percentage")?.byteValue
            return first != nil
        }
        #expect(
            first.map { $0 <= 100 } == true, "\(bluetoothd): Percentage \(String(describing: first))",
            sourceLocation: sourceLocation)

        // The peer's notifications move it.
        let later = client.mark
        let change = try await client.waitForSignal(from: later, "Percentage notified", timeout: .seconds(30)) {
            $0.changes(path, battery, "Percentage")
        }
        let notified = change.changed["Percentage"]?.byteValue
        #expect(
            notified != nil && notified != first, "\(bluetoothd): \(String(describing: first)) then \(change)",
            sourceLocation: sourceLocation)

        // The Battery service is exported; its level is not notifying for any D-Bus client.
        let objects = try await client.managedObjects()
        let characteristics = objects.filter {
            $0.key.hasPrefix(path + "/") && $0.value.contains("org.bluez.GattCharacteristic1")
        }.keys
        var levelPath: String?
        for candidate in characteristics.sorted()
        where await client.property(candidate, "org.bluez.GattCharacteristic1", "UUID") == .string(batteryLevel) {
            levelPath = candidate
        }
        #expect(
            levelPath != nil, "\(bluetoothd): no Battery Level among \(characteristics.sorted())",
            sourceLocation: sourceLocation)
        if let levelPath {
            let service = String(levelPath[..<(levelPath.lastIndex(of: "/") ?? levelPath.endIndex)])
            #expect(
                await client.property(service, "org.bluez.GattService1", "UUID") == .string(batteryService),
                "\(bluetoothd): \(service)", sourceLocation: sourceLocation)
            #expect(
                await client.property(levelPath, "org.bluez.GattCharacteristic1", "Notifying") == .bool(false),
                "\(bluetoothd): the plugin's subscription shows as Notifying", sourceLocation: sourceLocation)
        }

        let ending = client.mark
        _ = await client.error(path, "org.bluez.Device1", "Disconnect")
        try await client.waitForSignal(from: ending, "Battery1 removed", timeout: .seconds(30)) {
            $0.member == "InterfacesRemoved" && $0.objectPath == path && $0.removedInterfaces.contains(battery)
        }
        try await client.waitForProperty(path, "org.bluez.Device1", "Connected", toBe: .bool(false))
        try await client.forgetDevice(path, on: bluetoothd)
    }
}
