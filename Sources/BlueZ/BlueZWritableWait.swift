import DBus
import Dispatch
import Locking

/// A socket's one pending wait for room to write: arming it again replaces the wait, and a wait
/// that fires forgets itself unless a newer one has replaced it.
///
/// Kept in the socket's locked state (``BlueZWritableWaitHolder``); the write socket and the
/// notify link share it.
struct BlueZWritableWait: Sendable {
    private var readiness: DescriptorReadiness?
    /// Counts the arms, so a fired wait knows whether it is still the current one.
    private var arms = 0

    /// Cancels the pending wait, if any: its body is not called.
    mutating func cancel() {
        readiness?.cancel()
        readiness = nil
    }

    fileprivate mutating func arm(
        _ descriptor: SharedDescriptor, queue: DispatchQueue, fired: @escaping @Sendable (_ arm: Int) -> Void
    ) {
        readiness?.cancel()
        arms += 1
        let arm = arms
        readiness = DescriptorReadiness.oneShot(descriptor, .writable, queue: queue) { fired(arm) }
    }

    fileprivate mutating func forget(_ arm: Int) {
        if arms == arm { readiness = nil }
    }
}

/// A socket's locked state that keeps a ``BlueZWritableWait``.
protocol BlueZWritableWaitHolder: Sendable {
    /// True once the socket is closed: no wait is armed then.
    var closed: Bool { get }
    /// The descriptor, until closed.
    var descriptor: SharedDescriptor? { get }
    var writableWait: BlueZWritableWait { get set }
}

extension PosixMutex where Value: BlueZWritableWaitHolder {
    /// Arms the state's wait so that `body` runs once on `queue` when the descriptor has room;
    /// false, arming nothing, when the socket is closed already.
    func armWritableWait(queue: DispatchQueue, _ body: @escaping @Sendable () -> Void) -> Bool {
        withLock { state in
            guard !state.closed, let descriptor = state.descriptor else { return false }
            state.writableWait.arm(descriptor, queue: queue) { [weak self] arm in
                self?.withLock { $0.writableWait.forget(arm) }
                body()
            }
            return true
        }
    }
}
