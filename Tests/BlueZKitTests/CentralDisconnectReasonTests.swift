import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Why a link ended (``BluetoothError/disconnectReason``), on the simulator playing each release:
/// 5.87 sends `Device1.Disconnected(reason, message)` before `Connected` turns false, 5.66 and
/// 5.82 send nothing and the reason is ``DisconnectReason/notReported``.
@Suite(.timeLimit(.minutes(2))) struct CentralDisconnectReasonTests {
    final class Recorder: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.disconnect-reason")
        private let log = PosixMutex<[(reconnecting: Bool, error: (any Error)?)]>([])
        private let connectedCount = PosixMutex(0)
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            connectedCount.withLock { $0 += 1 }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: Double,
            isReconnecting: Bool, error: (any Error)?
        ) {
            log.withLock { $0.append((isReconnecting, error)) }
        }
        var connections: Int { connectedCount.withLock { $0 } }
        var disconnections: [(reconnecting: Bool, error: (any Error)?)] { log.withLock { $0 } }
    }

    struct Setup {
        let bluez: SimulatedBlueZ
        let sensor: SimulatedPeripheral
        let central: CentralManager
        let delegate: Recorder
        let peripheral: Peripheral

        /// A simulator of `version` with a heart-rate sensor, and a central connected to it.
        static func connected(_ version: SimulatedBlueZ.Version, autoReconnect: Bool = false) async throws -> Setup {
            let bluez = try await SimulatedBlueZ.start(options: .init(version: version))
            let sensor = CentralManagerScanTests.heartRateSensor()
            try bluez.addPeripheral(sensor)
            let delegate = Recorder()
            let central = CentralManager(
                delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
            try await waitUntil("powered on") { central.state == .poweredOn }
            let peripheral = try await firstDiscovery(central, scanningFor: nil, advertising: sensor)
            central.connect(peripheral, options: [CBConnectPeripheralOptionEnableAutoReconnect: autoReconnect])
            try await waitUntil("connected") { delegate.connections == 1 }
            return Setup(bluez: bluez, sensor: sensor, central: central, delegate: delegate, peripheral: peripheral)
        }

        /// The error of the first `didDisconnectPeripheral`, once it came.
        func firstDisconnection() async throws -> BluetoothError {
            try await waitUntil("the link's end reported") { !delegate.disconnections.isEmpty }
            return try #require(delegate.disconnections.first?.error as? BluetoothError)
        }
    }

    /// Checks `error` against what `version` reports for a link that ended for `reason` with
    /// bluetoothd's `message` (5.87), or with no reason (5.66, 5.82).
    static func check(
        _ error: BluetoothError, _ version: SimulatedBlueZ.Version, reason: DisconnectReason, message: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let report = error.underlying as? DisconnectReport
        if version >= .bluez5_87 {
            #expect(error.disconnectReason == reason, "\(error)", sourceLocation: sourceLocation)
            #expect(report?.bluetoothdMessage == message, "\(error)", sourceLocation: sourceLocation)
            #expect(error.code == reason.errorCode, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(message), "\(error)", sourceLocation: sourceLocation)
        } else {
            #expect(error.disconnectReason == .notReported, "\(error)", sourceLocation: sourceLocation)
            #expect(report?.bluetoothdMessage == nil, "\(error)", sourceLocation: sourceLocation)
            #expect(error.code == .peripheralDisconnected, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains("did not report"), "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func aPeripheralThatEndsTheLinkIsRemoteHost(version: SimulatedBlueZ.Version) async throws {
        let setup = try await Setup.connected(version)
        defer { setup.bluez.stop() }
        setup.sensor.dropConnection()
        let error = try await setup.firstDisconnection()
        Self.check(error, version, reason: .remoteHost, message: "Connection terminated by remote user")
        #expect(error.code == .peripheralDisconnected)
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func aPeripheralOutOfRangeIsAConnectionTimeout(version: SimulatedBlueZ.Version) async throws {
        let setup = try await Setup.connected(version)
        defer { setup.bluez.stop() }
        setup.sensor.setInRange(false)
        let error = try await setup.firstDisconnection()
        Self.check(error, version, reason: .connectionTimeout, message: "Connection timeout")
        #expect(error.code == (version >= .bluez5_87 ? .connectionTimeout : .peripheralDisconnected))
    }

    /// Another process's `Disconnect` (here another manager's cancel) ends the link for this app
    /// too: this host ended it, and the other manager, which cancelled, hears no error.
    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func anotherClientsDisconnectIsLocalHost(version: SimulatedBlueZ.Version) async throws {
        let setup = try await Setup.connected(version)
        defer { setup.bluez.stop() }
        let other = Recorder()
        let otherCentral = CentralManager(
            delegate: other, queue: other.queue, options: CentralManagerOptions(busAddress: setup.bluez.busAddress))
        try await waitUntil("the other manager powered on") { otherCentral.state == .poweredOn }
        let same = try #require(otherCentral.retrievePeripherals(withIdentifiers: [setup.peripheral.identifier]).first)
        otherCentral.connect(same)
        try await waitUntil("the other manager connected") { other.connections == 1 }
        otherCentral.cancelPeripheralConnection(same)
        let error = try await setup.firstDisconnection()
        Self.check(error, version, reason: .localHost, message: "Connection terminated by local host")
        try await waitUntil("the other manager's cancel reported") { !other.disconnections.isEmpty }
        #expect(other.disconnections.first?.error == nil)
    }

    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func anAdapterPoweredOffIsUnknown(version: SimulatedBlueZ.Version) async throws {
        let setup = try await Setup.connected(version)
        defer { setup.bluez.stop() }
        setup.bluez.adapters[0].setPowered(false)
        let error = try await setup.firstDisconnection()
        Self.check(error, version, reason: .unknown, message: "Unspecified")
        #expect(error.code == .peripheralDisconnected)
    }

    /// With `EnableAutoReconnect` the disconnection that goes with the reconnection carries the
    /// reason too.
    @Test(arguments: SimulatedBlueZ.Version.allCases)
    func aReconnectingDisconnectionCarriesTheReason(version: SimulatedBlueZ.Version) async throws {
        let setup = try await Setup.connected(version, autoReconnect: true)
        defer { setup.bluez.stop() }
        setup.sensor.dropConnection()
        let error = try await setup.firstDisconnection()
        #expect(setup.delegate.disconnections.first?.reconnecting == true)
        Self.check(error, version, reason: .remoteHost, message: "Connection terminated by remote user")
        try await waitUntil("reconnected") { setup.delegate.connections == 2 }
    }

    /// A reason bluetoothd does not (yet) send is unknown, with its message kept, bounded.
    @Test func anUnknownReasonNameIsUnknown() async throws {
        let setup = try await Setup.connected(.bluez5_87)
        defer { setup.bluez.stop() }
        let long = String(repeating: "x", count: 5000)
        setup.sensor.dropConnection(reason: "org.bluez.Reason.FromTheFuture", message: long)
        let error = try await setup.firstDisconnection()
        #expect(error.disconnectReason == .unknown)
        #expect(error.code == .peripheralDisconnected)
        let kept = try #require((error.underlying as? DisconnectReport)?.bluetoothdMessage)
        #expect(kept.count == 200 && long.hasPrefix(kept))
    }

    /// The reasons' Core Bluetooth codes: only a timeout and lost keys have one of their own.
    @Test func eachReasonHasItsCoreBluetoothCode() {
        let codes = Dictionary(uniqueKeysWithValues: DisconnectReason.allCases.map { ($0, $0.errorCode) })
        #expect(codes[.connectionTimeout] == .connectionTimeout)
        #expect(codes[.authenticationFailure] == .peerRemovedPairingInformation)
        for reason in [DisconnectReason.remoteHost, .localHost, .localHostSuspend, .unknown, .notReported] {
            #expect(codes[reason] == .peripheralDisconnected, "\(reason)")
        }
        #expect(BluetoothError(.peripheralDisconnected).disconnectReason == nil)
    }
}
