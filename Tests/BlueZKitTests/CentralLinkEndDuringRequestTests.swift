import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// A request in flight when the peripheral ends the link: bluetoothd fails it with ATT 0x0E, as
/// it fails a request whose pairing failed (the kernel then ends the link too). bluetoothd 5.83
/// and later say why the link ended (`Device1.Disconnected`): a peripheral that ended it is
/// `peripheralDisconnected`, as Core Bluetooth reports it, not `pairingFailed`. Found by the
/// e2e ServicesResolved race test, whose Bumble peer first ended the link as it answered a write.
@Suite(.timeLimit(.minutes(2))) struct CentralLinkEndDuringRequestTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.link-end")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    /// Writes to a characteristic whose peripheral ends the link instead of answering, giving
    /// bluetoothd's `reason` (nil: an older bluetoothd, which gives none); returns the error.
    static func writeError(reason: String?) async throws -> BluetoothError? {
        let bluez = try await SimulatedBlueZ.start(options: .init(version: reason == nil ? .bluez5_82 : .bluez5_87))
        defer { bluez.stop() }
        let sensor = PosixMutex<SimulatedPeripheral?>(nil)
        let control = SimulatedCharacteristic(uuid: "FFF1", flags: ["write"], onRead: nil) {
            _ throws(SimulatedATTError) in
            guard let peripheral = sensor.withLock({ $0 }) else { return }
            if let reason {
                peripheral.dropConnection(reason: reason, message: "ended")
            } else {
                peripheral.dropConnection()
            }
            throw .unlikelyError
        }
        let peripheral = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:0A", name: "Ender", serviceUUIDs: ["FFF0"],
            services: [SimulatedService(uuid: "FFF0", characteristics: [control])])
        sensor.withLock { $0 = peripheral }
        try bluez.addPeripheral(peripheral)
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { central.state == .poweredOn }
        let ender = try await firstDiscovery(central, scanningFor: nil, advertising: peripheral)
        try await central.connect(to: ender)
        let service = try #require(try await ender.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let characteristic = try #require(try await ender.discoverCharacteristics(matching: nil, in: service).first)
        do {
            try await ender.writeValue(Data([1]), to: characteristic)
            return nil
        } catch let error as BluetoothError {
            return error
        }
    }

    @Test func aPeripheralThatEndsTheLinkIsPeripheralDisconnected() async throws {
        let error = try await Self.writeError(reason: "org.bluez.Reason.Remote")
        #expect(error?.code == .peripheralDisconnected, "\(String(describing: error))")
    }

    @Test func aSupervisionTimeoutIsConnectionTimeout() async throws {
        let error = try await Self.writeError(reason: "org.bluez.Reason.Timeout")
        #expect(error?.code == .connectionTimeout, "\(String(describing: error))")
    }

    /// Before 5.83 nothing tells the two apart, and a failed pairing is the likelier cause.
    @Test func withoutAReasonItIsTakenForAFailedPairing() async throws {
        let error = try await Self.writeError(reason: nil)
        #expect(error?.code == .pairingFailed, "\(String(describing: error))")
    }

    @Test func anAuthenticationFailureIsAFailedPairing() async throws {
        let error = try await Self.writeError(reason: "org.bluez.Reason.Authentication")
        #expect(error?.code == .pairingFailed, "\(String(describing: error))")
    }
}
