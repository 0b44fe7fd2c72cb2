import DBus

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

        init(_ claim: DBusSubscription) { self.claim = claim }

        /// Ends the route at once: its handler runs no more once this returns (on the queue).
        package func cancel() { claim.cancel() }
    }

    /// Sends each new `Value` of the remote characteristic `attribute` (a `PropertiesChanged`
    /// whose only change is `Value`, while the object cache holds the characteristic) to
    /// `handler`, on the queue, in bus order with the client's events, instead of reporting it
    /// as a ``Event/valueChanged(_:_:)`` event. On the queue; immediate (nothing is sent to the
    /// bus). Nil once the connection is closed (no signal arrives then).
    package func routeValues(of attribute: AttributeID, to handler: @escaping @Sendable ([UInt8]) -> Void)
        -> ValueRoute?
    {
        let path = attribute.path
        let interface = BlueZNames.gattCharacteristic
        let rule = DBusMatchRule(
            sender: BlueZNames.service, path: path, interface: .properties,
            member: DBusMessage.propertiesChangedMember)
        let cache: BlueZObjectCache = self.cache
        let claim = try? connection.claimSignals(rule) { [weak cache] message in
            guard let cache else { return false }
            switch cache.takeValue(message, at: path, interface: interface) {
            case .value(let bytes):
                handler(bytes)
                return true
            case .dropped: return true
            case .notTaken: return false
            }
        }
        return claim.map(ValueRoute.init)
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
