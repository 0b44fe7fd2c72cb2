import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

/// An encrypted characteristic pairs just works through the manager's own agent when the app made
/// it bluetoothd's default agent; without a default agent (the app did not ask, or opted out of
/// the agent, and nobody else registered one) it fails as bluetoothd makes it fail.
@Suite(.timeLimit(.minutes(5))) struct CentralPairingTests {
    final class Quiet: CentralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.pairing")
        func centralManagerDidUpdateState(_ central: CentralManager) {}
    }

    static func readSecret(registersPairingAgent: Bool, requestsDefault: Bool) async throws -> Result<Data, any Error> {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:09", name: "Lock", serviceUUIDs: ["FFF0"],
            services: [
                SimulatedService(
                    uuid: "FFF0",
                    characteristics: [SimulatedCharacteristic(uuid: "FFF1", flags: ["encrypt-read"], value: [7])])
            ])
        try bluez.addPeripheral(sensor)
        let delegate = Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(
                busAddress: bluez.busAddress, registersPairingAgent: registersPairingAgent,
                requestsDefaultPairingAgent: requestsDefault))
        try await waitUntil("powered on") { central.state == .poweredOn }
        // The agent registers in the background once bluetoothd is there: wait for it, so that the
        // outcome does not depend on which comes first.
        if requestsDefault {
            try await waitUntil("the default agent registered") {
                bluez.agentRegistrations.contains { $0.isDefault }
            }
        }
        let lock = try await firstDiscovery(central, scanningFor: nil, advertising: sensor)
        try await central.connect(to: lock)
        let service = try #require(try await lock.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let secret = try #require(try await lock.discoverCharacteristics(matching: nil, in: service).first)
        do {
            return .success(try await lock.readValue(of: secret))
        } catch {
            return .failure(error)
        }
    }

    @Test func theManagersDefaultAgentLetsAnEncryptedReadPair() async throws {
        let result = try await Self.readSecret(registersPairingAgent: true, requestsDefault: true)
        #expect((try? result.get()) == Data([7]))
    }

    @Test func withoutAnyAgentTheEncryptedReadFails() async throws {
        let result = try await Self.readSecret(registersPairingAgent: false, requestsDefault: false)
        #expect(throws: (any Error).self) { try result.get() }
    }

    /// By default the manager's agent is not the default one: it does not pair, for the whole
    /// machine, what the desktop's agent (here: none) should decide.
    @Test func byDefaultTheManagersAgentDoesNotPairForSecurity() async throws {
        let result = try await Self.readSecret(registersPairingAgent: true, requestsDefault: false)
        let error = #expect(throws: BluetoothError.self) { try result.get() }
        #expect(error?.code == .pairingFailed)
    }
}

/// Pairing state on `Peripheral`, and forgetting a pairing.
@Suite(.timeLimit(.minutes(5))) struct PeripheralPairingStateTests {
    @Test func pairedAfterAnEncryptedReadAndForgottenByUnpair() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:0A", name: "Lock", serviceUUIDs: ["FFF0"],
            services: [
                SimulatedService(
                    uuid: "FFF0",
                    characteristics: [SimulatedCharacteristic(uuid: "FFF1", flags: ["encrypt-read"], value: [7])])
            ])
        try bluez.addPeripheral(sensor)
        let delegate = CentralPairingTests.Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: true))
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("the default agent registered") { bluez.agentRegistrations.contains { $0.isDefault } }
        let lock = try await firstDiscovery(central, scanningFor: nil, advertising: sensor)
        try await central.connect(to: lock)
        #expect(!lock.isPaired)
        let service = try #require(try await lock.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let secret = try #require(try await lock.discoverCharacteristics(matching: nil, in: service).first)
        #expect(try await lock.readValue(of: secret) == Data([7]))
        try await waitUntil("paired") { lock.isPaired }
        try await central.unpair(lock)
        try await waitUntil("forgotten") { !lock.isPaired && lock.state == .disconnected }
        #expect(central.retrievePeripherals(withIdentifiers: [lock.identifier]).isEmpty)
    }

    @Test func knownAndBondedPeripheralsAndRemovingABondByIdentifier() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let lockSource = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:0B", name: "Lock", serviceUUIDs: ["FFF0"],
            services: [
                SimulatedService(
                    uuid: "FFF0",
                    characteristics: [SimulatedCharacteristic(uuid: "FFF1", flags: ["encrypt-read"], value: [7])])
            ])
        let tagSource = SimulatedPeripheral(address: "C0:FF:EE:00:00:0C", name: "Tag", serviceUUIDs: ["FFF0"])
        try bluez.addPeripheral(lockSource)
        try bluez.addPeripheral(tagSource)
        let delegate = CentralPairingTests.Quiet()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, requestsDefaultPairingAgent: true))
        try await waitUntil("powered on") { central.state == .poweredOn }
        try await waitUntil("the default agent registered") { bluez.agentRegistrations.contains { $0.isDefault } }
        central.scanForPeripherals(withServices: nil)
        lockSource.advertise()
        tagSource.advertise()
        try await waitUntil("both known") {
            Set(central.retrieveKnownPeripherals().compactMap(\.name)).isSuperset(of: ["Lock", "Tag"])
        }
        central.stopScan()
        #expect(central.retrieveBondedPeripherals().isEmpty)

        let lock = try #require(central.retrieveKnownPeripherals().first { $0.name == "Lock" })
        try await central.connect(to: lock)
        let service = try #require(try await lock.discoverServices(matching: [BluetoothUUID(0xFFF0)]).first)
        let secret = try #require(try await lock.discoverCharacteristics(matching: nil, in: service).first)
        #expect(try await lock.readValue(of: secret) == Data([7]))
        try await waitUntil("bonded") { lock.isBonded }
        #expect(central.retrieveBondedPeripherals().map(\.identifier) == [lock.identifier])

        try await central.removeBond(withIdentifier: lock.identifier)
        try await waitUntil("bond removed") { central.retrieveBondedPeripherals().isEmpty }
        #expect(!central.retrieveKnownPeripherals().contains { $0.identifier == lock.identifier })
        let error = await #expect(throws: BluetoothError.self) {
            try await central.removeBond(withIdentifier: lock.identifier)
        }
        #expect(error?.code == .unknownDevice)
    }
}
