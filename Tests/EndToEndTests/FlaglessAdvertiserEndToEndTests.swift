import BlueZKit
import Foundation
import TestSupport
import Testing

/// In the same serialized suite as the other end-to-end tests: they all use hci0 and hci1.
extension EndToEndTests {
    /// A scan for any peripheral finds BlueZ's example-advertisement on hci1, whose Flags carry no
    /// discoverable bit (hci1 is not discoverable): on these LE-only controllers bluetoothd 5.67
    /// and later take a filter of `Transport: le` alone for a regular discovery, which drops
    /// such advertisers; BlueZKit's empty `Pattern` keeps the discovery filtered.
    @Test(.loadScaledTimeLimit(minutes: 3)) func aScanForAnyPeripheralFindsAnAdvertiserWithoutADiscoverableFlag()
        async throws
    {
        try await ExamplePeripheral.forgetKnownDevices()
        let peripheral = try ExamplePeripheral()
        defer { peripheral.stop() }
        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        // btvirt reports an advertisement only when advertising or scanning is switched on: scan first.
        central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovering") { central.isScanning }
        try peripheral.start("example-advertisement")
        let hci1 = try await BluetoothctlSession.address(of: "hci1")
        try await waitUntil("discovered example-advertisement", timeout: .seconds(60)) {
            delegate.discovered?.address == hci1
        }
        central.stopScan()
        #expect(delegate.advertisedServices.contains(BluetoothUUID(0x180D)))
        // The premise: what hci0's bluetoothd received had no discoverable bit (AdvertisingFlags,
        // experimental: the guest's bluetoothd runs with -E).
        let path = "/org/bluez/hci0/dev_" + hci1.replacingOccurrences(of: ":", with: "_")
        let flags = try await Tool.output(
            "/usr/bin/busctl", ["get-property", "org.bluez", path, "org.bluez.Device1", "AdvertisingFlags"])
        // "ay 1 4": the type, the count, the bytes (no Flags field at all is "ay 0").
        let fields = flags.split(whereSeparator: \.isWhitespace)
        let bytes = fields.dropFirst(2).compactMap { UInt8($0) }
        #expect(fields.first == "ay" && bytes.count == fields.count - 2, "AdvertisingFlags: \(flags)")
        #expect(bytes.allSatisfy { $0 & 0x03 == 0 }, "AdvertisingFlags: \(flags)")
    }
}
