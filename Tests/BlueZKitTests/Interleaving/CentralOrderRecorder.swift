import BlueZKit
import Dispatch
import Foundation
import Locking

/// The delegate of an interleaving run's central manager and of its peripherals: checks that the
/// calls for one peripheral come in a valid order, reporting the first that does not to the ledger.
///
/// Valid order: no second `didConnect` without an end of the link between; no
/// `didDisconnectPeripheral` or `didFailToConnect` for a peripheral this manager never connected
/// nor was asked to connect; no value of a characteristic after `didUpdateNotificationState`
/// reported it unsubscribed, until one reports it subscribed again. (Only what the delegate
/// queue sees is compared, so the rules do not depend on when the run's task made its calls.)
final class CentralOrderRecorder: CentralManagerDelegate, PeripheralDelegate, Sendable {
    private struct Link: Sendable {
        var connected = false
        /// Connected once, or asked to connect, by this manager.
        var known = false
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
        state.withLock { $0.links[peripheral.identifier, default: Link()].known = true }
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
            defer { state.links[peripheral.identifier] = Link(connected: true, known: true) }
            return state.links[peripheral.identifier]?.connected == true
        }
        if twice { violate("didConnect while the peripheral was connected already") }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        guard peripheral.address == watchedAddress else { return }
        note("didFailToConnect \(error.map { "\($0)" } ?? "nil")")
        let link = state.withLock { state in
            defer { state.links[peripheral.identifier]?.connected = false }
            return state.links[peripheral.identifier] ?? Link()
        }
        if link.connected { violate("didFailToConnect while connected") }
        if !link.known { violate("didFailToConnect for a peripheral never asked to connect") }
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        guard peripheral.address == watchedAddress else { return }
        note("didDisconnectPeripheral \(error.map { "\($0)" } ?? "nil")")
        let link = state.withLock { state in
            defer { state.links[peripheral.identifier]?.connected = false }
            return state.links[peripheral.identifier] ?? Link()
        }
        if !link.known { violate("didDisconnectPeripheral for a peripheral never connected nor asked to connect") }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        let notifying = characteristic.isNotifying
        note("didUpdateNotificationState \(characteristic.uuid) \(notifying) \(error.map { "\($0)" } ?? "nil")")
        guard error == nil else { return }
        state.withLock { state in
            if notifying {
                state.unsubscribed.remove(characteristic.uuid)
            } else {
                state.unsubscribed.insert(characteristic.uuid)
            }
        }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        note("didUpdateValue \(characteristic.uuid) \(error == nil ? "ok" : "error")")
        guard error == nil, state.withLock({ $0.unsubscribed.contains(characteristic.uuid) }) else { return }
        violate("a value of \(characteristic.uuid) after didUpdateNotificationState reported it unsubscribed")
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        note("didWriteValue \(error.map { "\($0)" } ?? "ok")")
    }
}
