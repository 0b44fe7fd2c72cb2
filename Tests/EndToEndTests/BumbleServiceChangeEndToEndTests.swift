import BlueZKit
import Foundation
import TestSupport
import Testing

/// A Bumble peripheral (`Scripts/guest/bumble_service_changer.py`) that adds a service to its
/// GATT database while our central, on the Bumble-backed adapter, is connected, and indicates
/// Service Changed. In the serialized end-to-end suite.
extension EndToEndTests {
    static let bumbleChangingService = BluetoothUUID(string: "5A1E0601-B1E2-4C00-9E00-000000000001")
    static let bumbleChangingValue = BluetoothUUID(string: "5A1E0602-B1E2-4C00-9E00-000000000001")
    static let bumbleAddedService = BluetoothUUID(string: "5A1E0603-B1E2-4C00-9E00-000000000001")
    static let bumbleAddedValue = BluetoothUUID(string: "5A1E0604-B1E2-4C00-9E00-000000000001")

    /// Our central connects, discovers Bumble's one service and reads its characteristic; Bumble
    /// then adds a second service and indicates Service Changed over its handles (bluetoothd
    /// subscribed to Service Changed as it connected and confirms). The peripheral's delegate gets
    /// `peripheral(_:didModifyServices:)` with nothing invalidated (a service was only added), the
    /// first service stays usable, and a new `discoverServices` finds the added one, whose
    /// characteristic reads Bumble's value (09).
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func ourCentralHearsBumbleAddAService() async throws {
        let link = try await BumbleCentralLink.connect(
            "bumble_service_changer.py",
            [
                "--service", "\(Self.bumbleChangingService)", "--added", "\(Self.bumbleAddedService)",
                "--timeout", "200",
            ],
            advertising: Self.bumbleChangingService)
        let (peripheral, recorder, bumble) = (link.peripheral, link.recorder, link.bumble)
        peripheral.discoverServices(nil)
        try await waitUntil("services", timeout: .seconds(60)) { recorder.count("services") == 1 }
        let first = try #require(peripheral.services?.first { $0.uuid == Self.bumbleChangingService })
        #expect(peripheral.services?.contains { $0.uuid == Self.bumbleAddedService } == false)
        peripheral.discoverCharacteristics(nil, for: first)
        try await waitUntil("characteristics", timeout: .seconds(30)) { recorder.count("characteristics") == 1 }
        let value = try #require(first.characteristics?.first { $0.uuid == Self.bumbleChangingValue })
        peripheral.readValue(for: value)

        let changed = try await bumble.waitForEvents("changed", timeout: .seconds(60)).first
        #expect(changed?["subscribed"] as? Bool == true, "bluetoothd subscribed to Service Changed")
        try await pollUntil("didModifyServices", timeout: .seconds(30), diagnostics: bumble.diagnostics) {
            recorder.count("modified") >= 1
        }
        #expect(recorder.events.filter { $0.hasPrefix("modified") } == ["modified "], "\(recorder.events)")
        #expect(peripheral.services?.contains { $0.uuid == Self.bumbleChangingService } == true)
        peripheral.discoverServices(nil)
        try await waitUntil("services again", timeout: .seconds(60)) { recorder.count("services") == 2 }
        let added = try #require(peripheral.services?.first { $0.uuid == Self.bumbleAddedService })
        peripheral.discoverCharacteristics(nil, for: added)
        try await waitUntil("added characteristics", timeout: .seconds(30)) { recorder.count("characteristics") == 2 }
        let addedValue = try #require(added.characteristics?.first { $0.uuid == Self.bumbleAddedValue })
        peripheral.readValue(for: addedValue)
        try await waitUntil("read the added value", timeout: .seconds(30)) {
            recorder.events.contains("value \(Self.bumbleAddedValue) 09")
        }
        #expect(recorder.errors.isEmpty, "\(recorder.errors)")
        try await bumble.waitForEvents("readAdded", timeout: .seconds(30))
        link.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected", timeout: .seconds(30)) { peripheral.state == .disconnected }
        try await pollUntil("Bumble exits", timeout: .seconds(30), diagnostics: bumble.diagnostics) {
            bumble.status != nil
        }
        #expect(bumble.status == 0, "\(bumble.diagnostics())")
    }
}
