import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

/// Linux: the machine's adapters, with their addresses and power, and which one a manager uses.
@Suite(.timeLimit(.minutes(5))) struct AdapterListTests {
    @Test func listsEveryAdapterAndMarksTheOneInUse() async throws {
        let fixture = try await CentralFixture.make(adapters: [
            .init(address: "00:AA:01:00:00:00"),
            .init(address: "00:AA:01:01:00:01", powered: false),
        ])
        defer { withExtendedLifetime(fixture) {} }
        let adapters = fixture.central.adapters
        #expect(adapters.map(\.name) == ["hci0", "hci1"])
        #expect(adapters.map(\.address) == ["00:AA:01:00:00:00", "00:AA:01:01:00:01"])
        #expect(adapters.map(\.isPowered) == [true, false])
        #expect(adapters.map(\.isInUse) == [true, false])
        // Power follows bluetoothd.
        fixture.bluez.adapters.last?.setPowered(true)
        try await waitUntil("hci1 powered") { fixture.central.adapters.last?.isPowered == true }
    }
}
