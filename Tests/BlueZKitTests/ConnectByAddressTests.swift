import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// `CentralManager.connect(toAddress:type:)` against the simulated bluetoothd: `Adapter1.ConnectDevice`
/// with and without the simulated `--experimental`, on both simulated releases.
@Suite(.timeLimit(.minutes(5))) struct ConnectByAddressTests {
    /// Counts `didConnect` and `didDisconnectPeripheral`.
    final class LinkRecorder: CentralManagerDelegate, Sendable {
        let queue = DispatchQueue(label: "test.connect-by-address")
        private let counts = PosixMutex((connected: 0, disconnected: 0))
        var connected: Int { counts.withLock { $0.connected } }
        var disconnected: Int { counts.withLock { $0.disconnected } }
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            counts.withLock { $0.connected += 1 }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
        ) {
            counts.withLock { $0.disconnected += 1 }
        }
    }

    static func start(experimental: Bool, version: SimulatedBlueZ.Version = .bluez5_66) async throws -> (
        SimulatedBlueZ, CentralManager, LinkRecorder
    ) {
        let bluez = try await SimulatedBlueZ.start(
            options: SimulatedBlueZ.Options(version: version, experimental: experimental))
        let recorder = LinkRecorder()
        let central = CentralManager(
            delegate: recorder, queue: recorder.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        return (bluez, central, recorder)
    }

    /// A peripheral never scanned (it does not even advertise) is connected by its address: it is
    /// this manager's like any other (`didConnect`, services, `cancelPeripheralConnection`).
    @Test(arguments: SimulatedBlueZ.Version.allCases) func aNeverSeenPeripheralConnectsByAddress(
        version: SimulatedBlueZ.Version
    ) async throws {
        let (bluez, central, recorder) = try await Self.start(experimental: true, version: version)
        defer { bluez.stop() }
        let source = SimulatedPeripheral(
            address: "D1:B0:00:00:00:01", addressType: .random, name: "Hidden", advertisingFlags: 0,
            services: [SimulatedService(uuid: "FFF0", characteristics: [])])
        try bluez.addPeripheral(source)
        #expect(central.retrieveKnownPeripherals().isEmpty)
        let peripheral = try await central.connect(toAddress: "d1:b0:00:00:00:01", type: .random)
        #expect(peripheral.state == .connected)
        #expect(recorder.connected == 1)
        #expect(peripheral.address == "D1:B0:00:00:00:01")
        #expect(peripheral.addressType == .random)
        #expect(central.retrieveKnownPeripherals().map(\.identifier) == [peripheral.identifier])
        let services = try await peripheral.discoverServices(matching: [BluetoothUUID(0xFFF0)])
        #expect(services.map(\.uuid) == [BluetoothUUID(0xFFF0)])
        // Asking again while connected: the same peripheral, no second didConnect.
        let again = try await central.connect(toAddress: "D1:B0:00:00:00:01", type: .random)
        #expect(again === peripheral)
        #expect(recorder.connected == 1)
        try await central.disconnect(from: peripheral)
        #expect(recorder.disconnected == 1)
    }

    /// A device bluetoothd knows already (scanned): 5.66 refuses `ConnectDevice` (`AlreadyExists`)
    /// and BlueZKit connects it with `Device1.Connect`; 5.82 connects it with `ConnectDevice`.
    @Test(arguments: SimulatedBlueZ.Version.allCases) func aKnownPeripheralConnectsOnEveryRelease(
        version: SimulatedBlueZ.Version
    ) async throws {
        let (bluez, central, recorder) = try await Self.start(experimental: true, version: version)
        defer { bluez.stop() }
        let source = SimulatedPeripheral(address: "D1:B0:00:00:00:02", name: "Seen", serviceUUIDs: ["FFF0"])
        try bluez.addPeripheral(source)
        let seen = try await firstDiscovery(central, scanningFor: nil, advertising: source)
        central.stopScan()
        let peripheral = try await central.connect(toAddress: "D1:B0:00:00:00:02", type: .public)
        #expect(peripheral === seen)
        #expect(peripheral.state == .connected && recorder.connected == 1)
    }

    /// Without `--experimental` bluetoothd has no `ConnectDevice`: a typed error naming the flag.
    @Test func withoutExperimentalTheErrorNamesTheFlag() async throws {
        let (bluez, central, recorder) = try await Self.start(experimental: false)
        defer { bluez.stop() }
        try bluez.addPeripheral(SimulatedPeripheral(address: "D1:B0:00:00:00:03", name: "Any"))
        let error = await #expect(throws: BluetoothError.self) {
            try await central.connect(toAddress: "D1:B0:00:00:00:03", type: .public)
        }
        #expect(error?.code == .experimentalAPIUnavailable, "\(String(describing: error))")
        #expect(error?.message.contains("--experimental") == true)
        #expect(error?.underlying != nil)
        #expect(recorder.connected == 0)
        #expect(central.retrieveKnownPeripherals().isEmpty)
    }

    /// Nothing answers at the address (or at it with the other address type): one attempt, which
    /// fails with `connectionFailed`, and bluetoothd made no device.
    @Test(arguments: ["D1:B0:00:00:00:09", "D1:B0:00:00:00:04"]) func nobodyThereFailsOnce(address: String)
        async throws
    {
        let (bluez, central, recorder) = try await Self.start(experimental: true)
        defer { bluez.stop() }
        try bluez.addPeripheral(SimulatedPeripheral(address: "D1:B0:00:00:00:04", addressType: .random))
        let error = await #expect(throws: BluetoothError.self) {
            try await central.connect(toAddress: address, type: .public)
        }
        #expect(error?.code == .connectionFailed, "\(String(describing: error))")
        #expect(recorder.connected == 0)
        #expect(central.retrieveKnownPeripherals().isEmpty)
    }

    @Test(arguments: ["", "D1:B0:00:00:00", "D1:B0:00:00:00:0G", "D1-B0-00-00-00-01", "D1:B0:00:00:00:011"])
    func aMalformedAddressIsInvalid(address: String) async throws {
        let (bluez, central, _) = try await Self.start(experimental: true)
        defer { bluez.stop() }
        let error = await #expect(throws: BluetoothError.self) {
            try await central.connect(toAddress: address, type: .public)
        }
        #expect(error?.code == .invalidParameters)
    }

    /// Cancelling the task throws `CancellationError` at once; the link that bluetoothd still
    /// makes is taken down, and no `didConnect` reaches the app.
    @Test func cancellingTheTaskTakesTheLateLinkDown() async throws {
        let (bluez, central, recorder) = try await Self.start(experimental: true)
        defer { bluez.stop() }
        let source = SimulatedPeripheral(address: "D1:B0:00:00:00:05", name: "Late")
        try bluez.addPeripheral(source)
        bluez.inject(
            .delay(.seconds(2)), for: SimulatedMethod(interface: "org.bluez.Adapter1", member: "ConnectDevice"))
        let task = Task { try await central.connect(toAddress: "D1:B0:00:00:00:05", type: .public) }
        try await waitUntil("the call reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        try await waitUntil("the late link is taken down") {
            !central.retrieveKnownPeripherals().isEmpty && !source.isConnected
        }
        #expect(recorder.connected == 0)
    }
}
