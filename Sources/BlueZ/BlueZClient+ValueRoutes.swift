import DBus
import Synchronization

/// Routes for the hottest signal of a central: a subscribed characteristic's new `Value`.
///
/// A route is made once, when the layer above subscribes, and knows where the values go. It
/// claims the characteristic's `PropertiesChanged` at the connection's signal router (by path:
/// `DBusConnection.claimSignals(_:handler:)`), so a notification is matched by its path, stored in
/// the object cache as every value is, and handed to the route's handler, without the cache's
/// events or any lookup above. Every other signal (other properties, other objects, a value
/// while no tree is loaded) takes the general path as before.
extension BlueZClient {
    /// The route of one characteristic's `Value` changes; `cancel()` (or releasing it) ends it.
    package final class ValueRoute: Sendable {
        private let claim: DBusSubscription
        private let ended = Atomic<Bool>(false)
        /// Frees the route's value slot in the cache (once).
        private let endSlot: @Sendable () -> Void

        init(_ claim: DBusSubscription, endSlot: @escaping @Sendable () -> Void) {
            self.claim = claim
            self.endSlot = endSlot
        }

        /// Ends the route at once: its handler runs no more once this returns (on the queue).
        package func cancel() {
            claim.cancel()
            end()
        }

        private func end() {
            guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
            endSlot()
        }

        deinit {
            claim.cancel()
            end()
        }
    }

    /// Sends each new `Value` of the remote characteristic `attribute` (a `PropertiesChanged`
    /// whose only change is `Value`, while the object cache holds the characteristic) to
    /// `handler`, on the queue, in bus order with the client's events, instead of reporting it
    /// as a ``Event/valueChanged(_:_:)`` event. The cache keeps the value as every value is kept
    /// (through the route's value slot: `BlueZObjectCache+ValueSlots.swift`). On the queue;
    /// immediate (nothing is sent to the bus). Nil once the connection is closed (no signal
    /// arrives then).
    package func routeValues(of attribute: AttributeID, to handler: @escaping @Sendable ([UInt8]) -> Void)
        -> ValueRoute?
    {
        let rule = DBusMatchRule(
            sender: BlueZNames.service, path: attribute.path, interface: .properties,
            member: DBusMessage.propertiesChangedMember)
        let cache: BlueZObjectCache = self.cache
        let slot = cache.addValueSlot(at: attribute.path, interface: BlueZNames.gattCharacteristic)
        let queue = connection.queue
        // The slot is freed on the queue, later when the route ends elsewhere: until then the
        // (cancelled) claim takes nothing more, and the cache writes its last value when read.
        let endSlot: @Sendable () -> Void = { [weak cache] in
            queue.async { [weak cache] in cache?.removeValueSlot(slot) }
        }
        let claim = try? connection.claimSignals(rule) { [weak cache] message in
            guard let cache else { return false }
            switch cache.takeValue(message, slot: slot) {
            case .value(let bytes):
                handler(bytes)
                return true
            case .dropped: return true
            case .notTaken: return false
            }
        }
        guard let claim else {
            cache.removeValueSlot(slot)
            return nil
        }
        return ValueRoute(claim, endSlot: endSlot)
    }
}

extension BlueZClient {
    /// Hands `work` to the thread that is reading the bus and handling the current event, to run
    /// once it has left the client's queue (``WorkAfterEvent``); true when taken, false when the
    /// caller is anywhere else (then it hands the work on as before). How a value reaches another
    /// serial queue with `sync` from the reading thread, not with `async` and a second wake-up.
    package static func runAfterBusEvent(_ work: @escaping @Sendable () -> Void) -> Bool {
        WorkAfterEvent.enqueue(work)
    }

    /// The name of the threads that read a client's bus (and run the work handed to them).
    package static let busReaderThreadName = WorkAfterEvent.readingThreadName
}
