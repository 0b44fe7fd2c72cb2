import BlueZKitTesting
import BluetoothdConformance
import Testing

/// The conformance bodies (Tests/BluetoothdConformance) against the simulator, once per release
/// it plays: where a body fails here and passes against the real bluetoothd (EndToEndTests'
/// ConformanceEndToEndTests), the simulator is the bug. The bonded half of the CCC body has no
/// harness here yet.
@Suite(.timeLimit(.minutes(1))) struct ConformanceSimulatorTests {
    @Test(arguments: SimulatedBlueZ.Version.allCases, [true, false])
    func discovery(_ version: SimulatedBlueZ.Version, connectable: Bool) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await DiscoveryConformance.run(bluetoothd, peer: peer, connectable: connectable)
        await peer.stop()
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func connectToASilentDevice(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await DeviceConformance.run(bluetoothd, peer: peer, connectTimeout: .seconds(10))
        await peer.stop()
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func connectedSignalOfAConnect(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await ConnectConformance.run(bluetoothd, peer: peer)
        await peer.stop()
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func firstServiceDiscovery(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await GATTConformance.run(bluetoothd, peer: peer)
        await peer.stop()
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func batteryOfAConnectedDevice(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await BatteryConformance.run(bluetoothd, peer: peer)
        await peer.stop()
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func unbondedSubscriptionAcrossALinkLoss(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        let peer = SimulatedConformancePeer(bluez)
        try await CCCConformance.runUnbonded(bluetoothd, peer: peer)
        await peer.stop()
    }

    /// An advertisement's interval, TX power and secondary channel on a legacy controller, with
    /// `--experimental` as the guest's bluetoothd runs.
    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func advertisingParameters(_ version: SimulatedBlueZ.Version) async throws {
        let bluez = try await SimulatedBlueZ.start(
            adapters: [.init(name: "hci0", dualMode: false)],
            options: .init(version: version, advertisementMonitor: true))
        defer { bluez.stop() }
        let bluetoothd = BluetoothdUnderTest(
            name: "simulator", version: SimulatedBluetoothd.version(version), busAddress: bluez.busAddress)
        try await AdvertisingParametersConformance.run(bluetoothd)
    }

    /// A controller with extended advertising, with `--experimental` as the guest's bluetoothd runs.
    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func extendedAdvertising(_ version: SimulatedBlueZ.Version) async throws {
        var adapter = SimulatedAdapter.Configuration(name: "hci0", dualMode: false)
        adapter.extendedAdvertising = true
        let bluez = try await SimulatedBlueZ.start(
            adapters: [adapter], options: .init(version: version, advertisementMonitor: true))
        defer { bluez.stop() }
        let bluetoothd = BluetoothdUnderTest(
            name: "simulator", version: SimulatedBluetoothd.version(version), busAddress: bluez.busAddress)
        try await ExtendedAdvertisingConformance.run(
            bluetoothd, maximumLength: 251, takesLongData: version != .bluez5_66)
    }

    /// bluetoothd's queue of default agents, judged by the lines of its log.
    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func defaultAgents(_ version: SimulatedBlueZ.Version) async throws {
        let (bluez, bluetoothd) = try await SimulatedBluetoothd.start(version)
        defer { bluez.stop() }
        try await AgentConformance.run(bluetoothd)
    }
}
