import DBus
import TestSupport
public import Testing

/// Which discovery filters report an LE advertiser without a discoverable flag.
///
/// bluetoothd 5.67 (de8e7cfce, "adapter: Fix not using the filter when no discovery filter is
/// set") takes a filter that sets nothing but the adapter's own transport for no filter at all:
/// on an LE-only controller, `Transport: le` alone is a REGULAR discovery, which drops advertisers
/// whose Flags carry no discoverable bit. 5.66 still runs it as a filtered discovery, which
/// reports them. A `Pattern` (even empty) keeps the discovery filtered on every release.
public enum DiscoveryConformance {
    /// The release from which `Transport: le` alone is a regular discovery.
    public static let regularFromVersion = BluetoothdUnderTest.Version(5, 67)

    /// Runs both halves against `bluetoothd`, whose adapter is LE-only, with `peer` advertising
    /// without a discoverable flag.
    public static func run(
        _ bluetoothd: BluetoothdUnderTest, peer: some ConformancePeer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.discovery")
        defer { client.close() }
        let path = bluetoothd.devicePath(try await peer.address)
        try await client.forgetDevice(path, on: bluetoothd)

        // Transport: le alone. The virtual controller reports an advertisement when scanning or
        // advertising is switched on: scan first.
        try await client.startDiscovery(["Transport": .string("le")], on: bluetoothd)
        try await peer.startAdvertising()
        let expectReported = bluetoothd.version < regularFromVersion
        let reported = try await BlueZCalls.holds(within: peer.absenceWait) { try await client.exists(path) }
        #expect(
            reported == expectReported,
            "\(bluetoothd): a Transport-le-only filter reported the flag-less advertiser: \(reported)",
            sourceLocation: sourceLocation)
        await client.stopDiscovery(on: bluetoothd)
        try await client.forgetDevice(path, on: bluetoothd)

        // Transport: le and an empty Pattern: a filtered discovery on every release.
        try await client.startDiscovery(["Transport": .string("le"), "Pattern": .string("")], on: bluetoothd)
        let found = try await BlueZCalls.holds(within: .seconds(60)) { try await client.exists(path) }
        #expect(
            found, "\(bluetoothd): a filter with an empty Pattern did not report the flag-less advertiser",
            sourceLocation: sourceLocation)
        await client.stopDiscovery(on: bluetoothd)
        try await client.forgetDevice(path, on: bluetoothd)
    }
}
