import BlueZKit
import Dispatch
import Foundation
import Locking

/// The delegate of an interleaving run's central manager and of its peripherals: checks that the
/// calls for one peripheral come in a valid order, reporting the first that does not to the ledger.
///
/// Valid order: no second `didConnect` without an end of the link between; no
/// `didDisconnectPeripheral` or `didFailToConnect` without a `didConnect` or a connection request
/// since the last end; no value of a characteristic whose unsubscription completed, until it is
/// subscribed again.
final class CentralOrderRecorder: CentralManagerDelegate, PeripheralDelegate, Sendable {
    private struct Link: Sendable {
        var connected = false
        var requested = false
    }

    private struct State: Sendable {
        var links: [UUID: Link] = [:]
        /// Characteristics whose unsubscription completed (no value may follow), by UUID.
        var unsubscribed: Set<BluetoothUUID> = []
        var log: [String] = []
    }

    let queue: DispatchQueue
    private let ledger: CallLedger
    private let state = PosixMutex(State())

    /// Only the peripheral with this address is checked (other devices, such as simulated
    /// centrals of the peripheral role, may show up too).
    private let watchedAddress: String

    init(ledger: CallLedger, generation: Int, watchedAddress: String) {
        self.ledger = ledger
        self.watchedAddress = watchedAddress
        queue = DispatchQueue(label: "interleaving.central.\(generation)")
    }

    /// The app asked to connect to `peripheral` (before the call).
    func connectRequested(_ peripheral: Peripheral) {
        state.withLock { $0.links[peripheral.identifier, default: Link()].requested = true }
    }

    /// The app asked for notifications of `uuid` (before the call).
    func subscribeRequested(_ uuid: BluetoothUUID) {
        _ = state.withLock { $0.unsubscribed.remove(uuid) }
    }

    /// The last delegate calls, oldest first (for a failure's report).
    var recentCalls: [String] { state.withLock { Array($0.log.suffix(12)) } }

    private func violate(_ detail: String) {
        let log = recentCalls.joined(separator: "; ")
        ledger.violate(.delegateOrder, "\(detail) (recent delegate calls: \(log))")
    }

    private func note(_ line: String) {
        state.withLock { $0.log.append(line) }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) { note("didUpdateState \(central.state)") }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        guard peripheral.address == watchedAddress else { return }
        note("didConnect")
        let twice = state.withLock { state in
            defer { state.links[peripheral.identifier] = Link(connected: true, requested: false) }
            return state.links[peripheral.identifier]?.connected == true
        }
        if twice { violate("didConnect while the peripheral was connected already") }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        guard peripheral.address == watchedAddress else { return }
        note("didFailToConnect \(error.map { "\($0)" } ?? "nil")")
        let link = state.withLock { state in
            defer { state.links[peripheral.identifier] = Link() }
            return state.links[peripheral.identifier] ?? Link()
        }
        if link.connected { violate("didFailToConnect while connected") }
        if !link.connected && !link.requested { violate("didFailToConnect without a connection request") }
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        guard peripheral.address == watchedAddress else { return }
        note("didDisconnectPeripheral \(error.map { "\($0)" } ?? "nil")")
        let link = state.withLock { state in
            defer { state.links[peripheral.identifier] = Link() }
            return state.links[peripheral.identifier] ?? Link()
        }
        if !link.connected && !link.requested {
            violate("didDisconnectPeripheral without didConnect or a connection request since the last end")
        }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        let notifying = characteristic.isNotifying
        note("didUpdateNotificationState \(characteristic.uuid) \(notifying) \(error.map { "\($0)" } ?? "nil")")
        guard error == nil, !notifying else { return }
        _ = state.withLock { $0.unsubscribed.insert(characteristic.uuid) }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        note("didUpdateValue \(characteristic.uuid) \(error == nil ? "ok" : "error")")
        guard error == nil, state.withLock({ $0.unsubscribed.contains(characteristic.uuid) }) else { return }
        violate("a value of \(characteristic.uuid) after its unsubscription completed")
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        note("didWriteValue \(error.map { "\($0)" } ?? "ok")")
    }
}
