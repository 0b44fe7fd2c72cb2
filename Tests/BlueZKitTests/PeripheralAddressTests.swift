import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

/// Linux: a peripheral's Bluetooth address and its type, as bluetoothd reports them.
@Suite(.timeLimit(.minutes(5))) struct PeripheralAddressTests {
    @Test func aDiscoveredPeripheralHasItsAddressAndType() async throws {
        let fixture = try await CentralFixture.make()
        defer { withExtendedLifetime(fixture) {} }
        try fixture.bluez.addPeripheral(SimulatedPeripheral(address: "C0:FF:EE:00:00:01", name: "Public"))
        try fixture.bluez.addPeripheral(
            SimulatedPeripheral(address: "d2:00:00:00:00:02", addressType: .random, name: "Random"))
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("both discovered") {
            !fixture.delegate.discoveries(named: "Public").isEmpty
                && !fixture.delegate.discoveries(named: "Random").isEmpty
        }
        let publicOne = try #require(fixture.delegate.discoveries(named: "Public").first?.peripheral)
        let randomOne = try #require(fixture.delegate.discoveries(named: "Random").first?.peripheral)
        #expect(publicOne.address == "C0:FF:EE:00:00:01")
        #expect(publicOne.addressType == .public)
        // bluetoothd spells addresses in capitals.
        #expect(randomOne.address == "D2:00:00:00:00:02")
        #expect(randomOne.addressType == .random)
    }

    @Test func aRetrievedPeripheralHasItsAddress() async throws {
        let fixture = try await CentralFixture.make()
        defer { withExtendedLifetime(fixture) {} }
        try fixture.bluez.addPeripheral(
            SimulatedPeripheral(address: "C0:FF:EE:00:00:03", addressType: .random, name: "Kept"))
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "Kept").isEmpty }
        let identifier = try #require(fixture.delegate.discoveries(named: "Kept").first?.peripheral.identifier)
        let retrieved = try #require(fixture.central.retrievePeripherals(withIdentifiers: [identifier]).first)
        #expect(retrieved.address == "C0:FF:EE:00:00:03")
        #expect(retrieved.addressType == .random)
    }
}
