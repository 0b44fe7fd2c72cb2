import BlueZKit
import Dispatch
import Foundation
import Locking

/// The delegate of an interleaving run's peripheral manager: answers every request at once, and
/// records which services bluetoothd took and how often the manager said it is ready again.
final class PeripheralManagerRecorder: PeripheralManagerDelegate, Sendable {
    private struct State: Sendable {
        var added: Set<ObjectIdentifier> = []
        var ready = 0
        var log: [String] = []
    }

    let queue: DispatchQueue
    private let state = PosixMutex(State())

    init(generation: Int) {
        queue = DispatchQueue(label: "interleaving.peripheral.\(generation)")
    }

    /// Whether `didAdd` reported `service` registered (and no later failure for it).
    func isAdded(_ service: MutableService) -> Bool { state.withLock { $0.added.contains(ObjectIdentifier(service)) } }

    /// The last delegate calls, oldest first (for a failure's report).
    var recentCalls: [String] { state.withLock { Array($0.log.suffix(12)) } }

    private func note(_ line: String) { state.withLock { $0.log.append(line) } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) { note("didUpdateState \(peripheral.state)") }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        note("didAdd \(service.uuid) \(error.map { "\($0)" } ?? "ok")")
        state.withLock { state in
            if error == nil {
                state.added.insert(ObjectIdentifier(service))
            } else {
                state.added.remove(ObjectIdentifier(service))
            }
        }
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        note("didStartAdvertising \(error.map { "\($0)" } ?? "ok")")
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        request.value = Data([0x52])
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        peripheral.respond(to: first, withResult: .success)
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        note("didSubscribe \(central.identifier.uuidString.prefix(8))")
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        note("didUnsubscribe \(central.identifier.uuidString.prefix(8))")
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        note("isReady")
        state.withLock { $0.ready += 1 }
    }
}
