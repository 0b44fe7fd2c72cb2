import Foundation

/// A weak reference to a delegate, readable and writable from any thread.
///
/// Delegates are not `Sendable` (Core Bluetooth's are not either); the
/// library only calls them on the manager's queue. The invariant behind
/// `@unchecked Sendable`: `object` is read and written under `lock`.
final class WeakDelegate: @unchecked Sendable {
    private let lock = NSLock()
    private weak var object: AnyObject?

    init(_ object: AnyObject?) { self.object = object }

    var value: AnyObject? {
        get { lock.withLock { object } }
        set { lock.withLock { object = newValue } }
    }
}
