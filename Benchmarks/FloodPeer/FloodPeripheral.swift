import BlueZKit
import Dispatch
import Foundation

/// The peripheral roles of flood-peer: `peripheral` (RX takes writes, the delegate sleeps
/// `delay` per batch and drops them) and `notifier` (TX notifies a subscriber as fast as the
/// manager takes values).
///
/// Everything runs on `queue` (the delegate queue), so the mutable state needs no lock — the
/// invariant behind `@unchecked Sendable`.
final class FloodPeripheral: PeripheralManagerDelegate, @unchecked Sendable {
    static let service = BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
    static let rx = BluetoothUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
    static let tx = BluetoothUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")
    /// Values sent per pass before the queue is given back (a pass never blocks the queue).
    private static let valuesPerPass = 64

    let queue = DispatchQueue(label: "flood-peer.peripheral")
    private let adapter: String?
    private let name: String
    private let notifies: Bool
    private let delay: TimeInterval
    private let valueLength: Int
    private let counters: FloodCounters
    private var manager: PeripheralManager?
    private let rx = MutableCharacteristic(
        type: FloodPeripheral.rx, properties: [.write, .writeWithoutResponse], value: nil, permissions: [.writeable])
    private let tx = MutableCharacteristic(
        type: FloodPeripheral.tx, properties: [.notify], value: nil, permissions: [])
    private var started = false
    private var subscriber: Central?
    private var waitingForReady = false
    private var pumpScheduled = false
    private var value = Data()

    init(
        adapter: String?, name: String, notifies: Bool, delay: TimeInterval, valueLength: Int, counters: FloodCounters
    ) {
        self.adapter = adapter
        self.name = name
        self.notifies = notifies
        self.delay = delay
        self.valueLength = valueLength
        self.counters = counters
    }

    /// Creates the manager; everything else follows from its delegate calls.
    func start() {
        queue.async {
            self.manager = PeripheralManager(
                delegate: self, queue: self.queue, options: PeripheralManagerOptions(adapter: self.adapter))
        }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn, !started else { return }
        started = true
        let service = MutableService(type: Self.service, primary: true)
        service.characteristics = notifies ? [tx] : [rx]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        if let error {
            FloodOutput.fail("could not publish the service: \(error)")
            exit(1)
        }
        peripheral.startAdvertising([
            CBAdvertisementDataLocalNameKey: name, CBAdvertisementDataServiceUUIDsKey: [Self.service],
        ])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        if let error {
            FloodOutput.fail("could not advertise: \(error)")
            exit(1)
        }
        FloodOutput.emit("advertising", ["name": name])
    }

    // MARK: The slow RX (role peripheral)

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        counters.add("batches")
        counters.add("writes", requests.count)
        counters.add("bytes", requests.reduce(0) { $0 + ($1.value?.count ?? 0) })
        // A write with response waits for this; a write without response ignores it.
        peripheral.respond(to: first, withResult: .success)
        // The slow app: the delegate queue is busy for `delay`, and the values are dropped.
        Thread.sleep(forTimeInterval: delay)
    }

    // MARK: The notifier (role notifier)

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        subscriber = central
        // bluetoothd 5.66 tells the peripheral the MTU only with the central's first write (the
        // central says 20 until then); the link's MTU is larger, and bluetoothd cuts a longer value.
        let length = valueLength
        value = Data((0..<length).map { UInt8(truncatingIfNeeded: $0) })
        counters.set("value_bytes", length)
        FloodOutput.emit("subscribed", ["central": central.identifier.uuidString, "value_bytes": length])
        pump()
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        subscriber = nil
        FloodOutput.emit("unsubscribed", ["central": central.identifier.uuidString])
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        waitingForReady = false
        pump()
    }

    /// Sends values until the manager pushes back, a pass of ``valuesPerPass`` at a time.
    private func pump() {
        guard let manager, subscriber != nil, !waitingForReady else { return }
        for _ in 0..<Self.valuesPerPass {
            guard manager.updateValue(value, for: tx, onSubscribedCentrals: nil) else {
                counters.add("not_ready")
                waitingForReady = true
                return
            }
            counters.add("notifications")
        }
        guard !pumpScheduled else { return }
        pumpScheduled = true
        queue.async {
            self.pumpScheduled = false
            self.pump()
        }
    }
}
