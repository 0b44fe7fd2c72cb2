import BlueZKit
import TestSupport
import Testing

/// BlueZ's `example-gatt-server` and `example-advertisement` on hci1, found by a scan of our
/// central on hci0 for the Heart Rate service (both forgotten first): the start of the tests that
/// judge our central against BlueZ's own peripheral.
struct ExampleGattServerSession {
    let example: ExamplePeripheral
    let delegate: E2ECentralDelegate
    let central: CentralManager
    /// The peripheral the scan reported, not connected.
    let sensor: Peripheral

    /// Starts the scripts and scans until the advertisement is reported; stops the scan. The
    /// caller stops `example` (`defer { session.example.stop() }`); on a failure here it is stopped.
    static func start(options: CentralManagerOptions = CentralManagerOptions(adapter: "hci0")) async throws
        -> ExampleGattServerSession
    {
        try await ExamplePeripheral.forgetKnownDevices()
        let example = try ExamplePeripheral()
        do {
            try example.start("example-gatt-server")
            try await waitUntil("example-gatt-server registered", timeout: .seconds(60)) {
                example.log("example-gatt-server").contains("GATT application registered")
            }
            let delegate = E2ECentralDelegate()
            let central = CentralManager(delegate: delegate, queue: delegate.queue, options: options)
            try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
            // btvirt reports an advertisement only when advertising or scanning is switched on: scan first.
            central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
            try await waitUntil("discovering") { central.isScanning }
            try example.start("example-advertisement")
            try await waitUntil("discovered the heart-rate advertisement", timeout: .seconds(60)) {
                delegate.discovered != nil
            }
            central.stopScan()
            let sensor = try #require(delegate.discovered)
            return ExampleGattServerSession(example: example, delegate: delegate, central: central, sensor: sensor)
        } catch {
            example.stop()
            throw error
        }
    }
}
