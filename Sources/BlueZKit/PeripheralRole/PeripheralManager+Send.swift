public import Foundation
import Locking

/// The async counterpart of `updateValue`: a send that waits for room instead of returning false.
extension PeripheralManager {
    /// What one attempt of `updateValue` came to, on the bus queue.
    enum UpdateOutcome: Equatable {
        /// Sent (or there was nobody among the centrals named to send to).
        case sent
        /// Not now: `peripheralManagerIsReady(toUpdateSubscribers:)` follows when there is room.
        case full
        /// Not at all, for this reason.
        case refused(Refusal)
    }

    /// Why `updateValue` refused a value for good.
    enum Refusal: Equatable {
        /// The characteristic is not in a published service.
        case notPublished
        /// bluetoothd or the bus is away.
        case busAway
        /// Longer than what this central takes (its ATT MTU minus 3).
        case tooLong(central: UUID, limit: Int)
    }

    /// Sends `value` to the subscribed centrals as ``updateValue(_:for:onSubscribedCentrals:)``
    /// does, and when that would return false for want of room, waits for room and sends then.
    ///
    /// The same path as `updateValue` (same signal or socket writes, same order): where
    /// `updateValue` would say "not now", the task waits for the moment the delegate hears
    /// ``PeripheralManagerDelegate/peripheralManagerIsReady(toUpdateSubscribers:)`` (after the
    /// delegate call, on the manager's queue) and tries again. Values sent from one task keep
    /// their order. Cancelling the task while it waits throws `CancellationError`; nothing of
    /// that value was sent.
    /// - Throws: ``BluetoothError`` `invalidParameters` for a value `updateValue` refuses for good
    ///   (longer than 512 bytes or than a target central's ``Central/maximumUpdateValueLength``,
    ///   or a characteristic not published), `bluetoothUnavailable` while bluetoothd or the bus
    ///   is away; `CancellationError`.
    public func send(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]? = nil
    ) async throws {
        guard value.count <= Self.maximumValueLength else {
            throw BluetoothError(
                .invalidParameters, message: "an attribute value holds at most \(Self.maximumValueLength) bytes")
        }
        while true {
            try Task.checkCancellation()
            let id = updateWaiters.makeID()
            let outcome: UpdateOutcome = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation {
                    (continuation: CheckedContinuation<UpdateOutcome, any Error>) in
                    // The attempt and the wait begin in one block on the bus queue: the ready
                    // call that ends this wait is posted from there later.
                    let outcome = engine.run {
                        let outcome = engine.updateValueOnBusQueue(
                            value, for: characteristic, onSubscribedCentrals: centrals)
                        if outcome == .full { updateWaiters.add(id, continuation) }
                        return outcome
                    }
                    if outcome != .full { continuation.resume(returning: outcome) }
                }
            } onCancel: {
                updateWaiters.cancel(id)
            }
            switch outcome {
            case .sent:
                return
            case .refused(.busAway):
                throw BluetoothError(
                    .bluetoothUnavailable, message: "bluetoothd or the bus is away (the state is \(state))")
            case .refused(.notPublished):
                guard state == .poweredOn else {
                    throw BluetoothError(.bluetoothUnavailable, message: "the state is \(state), not poweredOn")
                }
                throw BluetoothError(
                    .invalidParameters, message: "\(characteristic.uuid) is not in a published service")
            case .refused(.tooLong(let central, let limit)):
                throw BluetoothError(
                    .invalidParameters,
                    message: "\(value.count) bytes for \(characteristic.uuid): central \(central.uuidString) "
                        + "takes at most \(limit) (its ATT MTU minus 3)")
            case .full:
                continue
            }
        }
    }
}

/// The tasks of ``PeripheralManager/send(_:for:onSubscribedCentrals:)`` that wait for room,
/// resumed (to try again) whenever the delegate heard "ready" or the state changed.
///
/// The invariant behind `Sendable`: the table sits behind a `PosixMutex`.
final class UpdateWaiters: Sendable {
    private struct Table {
        var nextID: UInt64 = 0
        var waiting: [UInt64: CheckedContinuation<PeripheralManager.UpdateOutcome, any Error>] = [:]
    }

    private let table = PosixMutex(Table())

    func makeID() -> UInt64 {
        table.withLock { table in
            table.nextID += 1
            return table.nextID
        }
    }

    func add(_ id: UInt64, _ continuation: CheckedContinuation<PeripheralManager.UpdateOutcome, any Error>) {
        table.withLock { $0.waiting[id] = continuation }
    }

    /// A waiting task was cancelled: it throws `CancellationError`. Nothing when it is not waiting.
    func cancel(_ id: UInt64) {
        table.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: CancellationError())
    }

    /// How many tasks wait (for tests).
    var count: Int { table.withLock { $0.waiting.count } }

    /// Every waiting task tries again (on the manager's queue, after the delegate's call).
    func resumeAll() {
        let all = table.withLock { table in
            defer { table.waiting.removeAll() }
            return Array(table.waiting.values)
        }
        for continuation in all { continuation.resume(returning: .full) }
    }
}
