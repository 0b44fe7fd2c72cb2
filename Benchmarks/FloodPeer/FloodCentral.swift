import BlueZKit
import Dispatch
import Foundation

/// The central role of flood-peer: finds the flood service, connects, subscribes to TX, and
/// sleeps `delay` per value in `peripheral(_:didUpdateValueFor:error:)`, keeping nothing.
///
/// Everything runs on `queue` (delegate calls of the manager and the peripheral), so the
/// mutable state needs no lock — the invariant behind `@unchecked Sendable`.
final class FloodCentral: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "flood-peer.central")
    private let adapter: String?
    private let name: String
    private let delay: TimeInterval
    private let counters: FloodCounters
    private var manager: CentralManager?
    /// The peer; kept strongly, as Core Bluetooth requires.
    private var peer: Peripheral?

    init(adapter: String?, name: String, delay: TimeInterval, counters: FloodCounters) {
        self.adapter = adapter
        self.name = name
        self.delay = delay
        self.counters = counters
    }

    /// Creates the manager; everything else follows from its delegate calls.
    func start() {
        queue.async {
            self.manager = CentralManager(
                delegate: self, queue: self.queue, options: CentralManagerOptions(adapter: self.adapter))
        }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        guard central.state == .poweredOn, peer == nil else { return }
        central.scanForPeripherals(withServices: [FloodPeripheral.service], options: nil)
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        guard peer == nil, (advertisementData.localName ?? peripheral.name) == name else { return }
        central.stopScan()
        peer = peripheral
        peripheral.delegate = self
        central.connect(peripheral)
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        peripheral.discoverServices([FloodPeripheral.service])
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        FloodOutput.fail("cannot connect: \(error.map { "\($0)" } ?? "unknown error")")
        exit(1)
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        FloodOutput.emit("disconnected", ["error": error.map { "\($0)" } ?? ""])
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        guard error == nil, let service = peripheral.services?.first(where: { $0.uuid == FloodPeripheral.service })
        else {
            FloodOutput.fail("no flood service: \(error.map { "\($0)" } ?? "not found")")
            exit(1)
        }
        peripheral.discoverCharacteristics([FloodPeripheral.tx], for: service)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        guard error == nil, let tx = service.characteristics?.first(where: { $0.uuid == FloodPeripheral.tx }) else {
            FloodOutput.fail("no TX characteristic: \(error.map { "\($0)" } ?? "not found")")
            exit(1)
        }
        peripheral.setNotifyValue(true, for: tx)
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error {
            FloodOutput.fail("subscribing failed: \(error)")
            exit(1)
        }
        FloodOutput.emit("subscribed", ["notifying": characteristic.isNotifying])
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        counters.add("notifications")
        counters.add("bytes", characteristic.value?.count ?? 0)
        // The slow app: the delegate queue is busy for `delay`, and the value is dropped.
        Thread.sleep(forTimeInterval: delay)
    }
}
