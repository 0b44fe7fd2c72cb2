import BluetoothdConformance
import TestSupport
import Testing

/// The conformance bodies (Tests/BluetoothdConformance) against the guest's real bluetoothd: the
/// judge of what the simulator (ConformanceSimulatorTests in BlueZKitTests) must do. hci0 is under
/// test; hci1 is the peer. In the serialized end-to-end suite.
extension EndToEndTests {
    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceDiscoveryOfAConnectableAdvertiser() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) {
            try await DiscoveryConformance.run(GuestBluetoothd.underTest(), peer: peer, connectable: true)
        }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceDiscoveryOfABroadcaster() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) {
            try await DiscoveryConformance.run(GuestBluetoothd.underTest(), peer: peer, connectable: false)
        }
    }

    /// The kernel gives up an LE connection after about 40 s: a generous limit.
    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceConnectToASilentDevice() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) { try await DeviceConformance.run(GuestBluetoothd.underTest(), peer: peer) }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceConnectedSignalOfAConnect() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) { try await ConnectConformance.run(GuestBluetoothd.underTest(), peer: peer) }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceFirstServiceDiscovery() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) { try await GATTConformance.run(GuestBluetoothd.underTest(), peer: peer) }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceBatteryOfAConnectedDevice() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) { try await BatteryConformance.run(GuestBluetoothd.underTest(), peer: peer) }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceUnbondedSubscriptionAcrossALinkLoss() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let peer = try GuestConformancePeer()
        try await withPeer(peer) { try await CCCConformance.runUnbonded(GuestBluetoothd.underTest(), peer: peer) }
    }

    @Test(.loadScaledTimeLimit(minutes: 4)) func conformanceBondedSubscriptionAcrossALinkLoss() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        try await PairingTools.withoutBonds {
            let peer = try GuestConformancePeer()
            try await withPeer(peer) { try await CCCConformance.runBonded(GuestBluetoothd.underTest(), peer: peer) }
        }
    }

    @Test(.loadScaledTimeLimit(minutes: 2)) func conformanceAdvertisingParameters() async throws {
        try await AdvertisingParametersConformance.run(GuestBluetoothd.underTest())
    }

    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 2))
    func conformanceExtendedAdvertising() async throws {
        let adapter = try #require(BumblePeer.adapters.first)
        // The kernel's number, which 5.66 reports too (and still takes no more than 31 bytes).
        try await ExtendedAdvertisingConformance.run(
            GuestBluetoothd.underTest(adapter: adapter), maximumLength: 251,
            takesLongData: emulatedBlueZ(atLeast: "5.76"))
    }

    @Test(.loadScaledTimeLimit(minutes: 2)) func conformanceDefaultAgent() async throws {
        try await AgentConformance.run(GuestBluetoothd.underTest())
    }

    /// Runs `body`, then stops the peer on every path.
    private func withPeer(_ peer: GuestConformancePeer, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            await peer.stop()
            throw error
        }
        await peer.stop()
    }
}
