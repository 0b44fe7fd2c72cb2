import DBus
import TestSupport
public import Testing

/// Which discovery filters report an LE advertiser without a discoverable flag.
///
/// - bluetoothd 5.67 (de8e7cfce) takes a filter that sets nothing but the adapter's own
///   transport for no filter at all: on an LE-only controller, `Transport: le` alone is a REGULAR
///   discovery. 5.66 still runs it as a filtered discovery, which reports every advertiser.
/// - A regular discovery creates no device for an advertiser without a discoverable bit; but
///   from 5.78 ("adapter: Create devices if they are connectable", August 2024) it does when the
///   advertiser is connectable (`!discoverable && !monitoring && not_connectable`), until 5.84
///   ("adapter: Implement SetFilterPolicy AutoConnect filter", May 2025, dropped the
///   `not_connectable` test again). Seen: the real 5.82 reports a connectable flag-less
///   advertiser under `Transport: le` alone, the real 5.87 does not. (The boundaries come from
///   the patches; only 5.66, 5.82 and 5.87 are run.)
/// - A `Pattern` (even empty) keeps the discovery filtered on every release.
///
/// A broadcaster advertises from a random address (the kernel's non-resolvable private address
/// for non-connectable advertising), so the body counts any new `Device1` of the adapter as the
/// peer: nothing else advertises while it runs.
public enum DiscoveryConformance {
    /// The release from which `Transport: le` alone is a regular discovery.
    public static let regularFromVersion = BluetoothdUnderTest.Version(5, 67)
    /// The release from which a regular discovery creates devices for connectable advertisers
    /// without a discoverable bit.
    public static let connectableCreatedFromVersion = BluetoothdUnderTest.Version(5, 78)
    /// The first release that no longer does.
    public static let connectableCreatedUntilVersion = BluetoothdUnderTest.Version(5, 84)

    /// Whether `bluetoothd` reports a flag-less advertiser under `Transport: le` alone.
    public static func reportsUnderTransportOnly(_ bluetoothd: BluetoothdUnderTest, connectable: Bool) -> Bool {
        bluetoothd.version < regularFromVersion
            || (connectable && bluetoothd.version >= connectableCreatedFromVersion
                && bluetoothd.version < connectableCreatedUntilVersion)
    }

    /// Runs both filters against `bluetoothd`, whose adapter is LE-only, with `peer` advertising
    /// without a discoverable flag, connectable or (`connectable` false) as a broadcaster.
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer, connectable: Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.discovery")
        defer { client.close() }
        let path = bluetoothd.devicePath(try await peer.address)
        let kind = connectable ? "connectable" : "non-connectable"
        try await client.forgetDevice(path, on: bluetoothd)
        let before = try await client.devicePaths(on: bluetoothd)
        let newDevices = { try await client.devicePaths(on: bluetoothd).subtracting(before) }
        let forgetNew = {
            for device in try await newDevices() { try await client.forgetDevice(device, on: bluetoothd) }
        }

        // Transport: le alone. The virtual controller reports an advertisement when scanning or
        // advertising is switched on: scan first.
        try await client.startDiscovery(["Transport": .string("le")], on: bluetoothd)
        if connectable { try await peer.startAdvertising() } else { try await peer.startBroadcasting() }
        let expectReported = reportsUnderTransportOnly(bluetoothd, connectable: connectable)
        let reported = try await BlueZCalls.holds(within: peer.absenceWait) { try await !newDevices().isEmpty }
        #expect(
            reported == expectReported,
            "\(bluetoothd): a Transport-le-only filter reported the \(kind) flag-less advertiser: \(reported)",
            sourceLocation: sourceLocation)
        await client.stopDiscovery(on: bluetoothd)
        try await forgetNew()

        // Transport: le and an empty Pattern: a filtered discovery on every release.
        try await client.startDiscovery(["Transport": .string("le"), "Pattern": .string("")], on: bluetoothd)
        // A client whose discovery runs gets `btd_error_busy` for a second StartDiscovery: the
        // central takes that answer for "ours runs already" (its background discovery).
        let again = await client.error(bluetoothd.adapterPath, "org.bluez.Adapter1", "StartDiscovery")
        #expect(
            again?.name == "org.bluez.Error.InProgress",
            "\(bluetoothd): a second StartDiscovery of a discovering client answered \(String(describing: again))",
            sourceLocation: sourceLocation)
        let found = try await BlueZCalls.holds(within: .seconds(60)) { try await !newDevices().isEmpty }
        #expect(
            found, "\(bluetoothd): a filter with an empty Pattern did not report the \(kind) flag-less advertiser",
            sourceLocation: sourceLocation)
        await client.stopDiscovery(on: bluetoothd)
        try await peer.goSilent()
        try await forgetNew()
    }
}
