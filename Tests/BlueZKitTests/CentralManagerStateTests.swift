import BlueZKit
import BlueZKitTesting
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct CentralManagerStateTests {
    @Test func reportsPoweredOnOnTheDelegateQueue() async throws {
        let fixture = try await CentralFixture.make()
        try await waitUntil("didUpdateState") { fixture.delegate.states == [.poweredOn] }
        #expect(fixture.delegate.offQueueCalls == 0)
    }

    @Test func followsTheAdapterPowerAndBluetoothdRestarts() async throws {
        let fixture = try await CentralFixture.make()
        let adapter = try #require(fixture.bluez.adapters.first)
        adapter.setPowered(false)
        try await waitUntil("powered off") { fixture.central.state == .poweredOff }
        adapter.setPowered(true)
        try await waitUntil("powered on again") { fixture.central.state == .poweredOn }
        try await fixture.bluez.restart()
        try await waitUntil("back after the restart") {
            fixture.delegate.states.suffix(2) == [.resetting, .poweredOn]
        }
        #expect(fixture.delegate.states == [.poweredOn, .poweredOff, .poweredOn, .resetting, .poweredOn])
    }

    @Test func isUnsupportedWithoutAnAdapter() async throws {
        let fixture = try await CentralFixture.make(adapters: [], waitForPower: false)
        try await waitUntil("unsupported") { fixture.central.state == .unsupported }
        #expect(fixture.delegate.states == [.unsupported])
    }

    @Test func ignoresScanningUntilPoweredOn() async throws {
        let fixture = try await CentralFixture.make()
        let adapter = try #require(fixture.bluez.adapters.first)
        adapter.setPowered(false)
        try await waitUntil("powered off") { fixture.central.state == .poweredOff }
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(!fixture.central.isScanning)
        #expect(!adapter.isDiscovering)
    }
}
