import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Scans with `central`, lets `sensor` advertise, and returns the first peripheral reported
/// (through the async discovery stream); the scan is stopped again. Waits 10 s at most (a scan
/// for services the sensor does not advertise finds nothing).
func firstDiscovery(
    _ central: CentralManager, scanningFor services: [BluetoothUUID]?, options: ScanOptions = .init(),
    advertising sensor: SimulatedPeripheral
) async throws -> Peripheral {
    let discoveries = central.discoveries()
    central.scanForPeripherals(withServices: services, options: options)
    sensor.advertise()
    let first = PosixMutex<Peripheral?>(nil)
    let reader = Task {
        for await discovery in discoveries {
            first.withLock { $0 = discovery.peripheral }
            break
        }
    }
    defer { reader.cancel() }
    try await waitUntil("the first discovery") { first.withLock { $0 } != nil }
    central.stopScan()
    return try #require(first.withLock { $0 })
}

/// Records what a central manager reports, and on which queue.
final class RecordingCentralDelegate: CentralManagerDelegate, @unchecked Sendable {
    struct Discovery: Sendable {
        let peripheral: Peripheral
        let data: AdvertisementData
        let rssi: Int
    }

    let queue = DispatchQueue(label: "test.central.delegate")
    private let key = DispatchSpecificKey<Bool>()
    private let recorded = PosixMutex<([ManagerState], [Discovery], Int)>(([], [], 0))

    init() { queue.setSpecific(key: key, value: true) }

    var states: [ManagerState] { recorded.withLock { $0.0 } }
    var discoveries: [Discovery] { recorded.withLock { $0.1 } }
    /// Callbacks that ran off the manager's queue (must stay 0).
    var offQueueCalls: Int { recorded.withLock { $0.2 } }

    private func checkQueue() {
        if DispatchQueue.getSpecific(key: key) != true { recorded.withLock { $0.2 += 1 } }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        checkQueue()
        let state = central.state
        recorded.withLock { $0.0.append(state) }
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        checkQueue()
        recorded.withLock { $0.1.append(Discovery(peripheral: peripheral, data: advertisementData, rssi: RSSI)) }
    }

    func discoveries(named name: String) -> [Discovery] { discoveries.filter { $0.data.localName == name } }

    private let linkLog = PosixMutex<[String]>([])
    /// "connected NAME", "failed NAME CODE", "disconnected NAME nil|CODE", in order.
    var links: [String] { linkLog.withLock { $0 } }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        checkQueue()
        let state = peripheral.state
        linkLog.withLock { $0.append("connected \(peripheral.name ?? "?") \(state)") }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        checkQueue()
        let code = (error as? BluetoothError).map { "\($0.code)" } ?? "nil"
        linkLog.withLock { $0.append("failed \(peripheral.name ?? "?") \(code)") }
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        checkQueue()
        let code = (error as? BluetoothError).map { "\($0.code)" } ?? "nil"
        let state = peripheral.state
        linkLog.withLock { $0.append("disconnected \(peripheral.name ?? "?") \(code) \(state)") }
    }
}

/// A simulated BlueZ with one adapter and a central manager on it, powered on.
struct CentralFixture {
    let bluez: SimulatedBlueZ
    let delegate: RecordingCentralDelegate
    let central: CentralManager

    static func make(
        adapters: [SimulatedAdapter.Configuration] = [.default], options: SimulatedBlueZ.Options = .init(),
        waitForPower: Bool = true, usesNotifySockets: Bool = CentralManagerOptions().usesNotifySockets
    ) async throws -> CentralFixture {
        let bluez = try await SimulatedBlueZ.start(adapters: adapters, options: options)
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: bluez.busAddress, usesNotifySockets: usesNotifySockets))
        if waitForPower {
            try await pollUntil(
                "the central is powered on", timeout: .seconds(10),
                diagnostics: { "state \(central.state), the delegate saw \(delegate.states)" },
                { central.state == .poweredOn })
        }
        return CentralFixture(bluez: bluez, delegate: delegate, central: central)
    }
}
