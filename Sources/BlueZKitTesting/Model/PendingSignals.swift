internal import DBus

/// Signals waiting for the end of the loop's turn, per object.
///
/// This is gdbus's model (`gdbus/object.c`): property changes are
/// coalesced per object and sent with their values at flush time; a
/// property change of an interface not yet announced is dropped (the
/// `InterfacesAdded` carries it); an interface added and removed in one
/// turn is never announced; each object sends `InterfacesAdded`, then
/// `PropertiesChanged`, then `InterfacesRemoved`. Objects are flushed in
/// two orders, as gdbus does: before a reply, in the order they were first
/// touched (its `pending` list); at the end of a turn, in the order they
/// were last touched (each touch re-adds the object's idle source).
struct PendingSignals {
    struct Entry {
        var added: [String] = []
        var changed: [(interface: String, names: [String])] = []
        var removed: [String] = []

        var isEmpty: Bool { added.isEmpty && changed.isEmpty && removed.isEmpty }
    }

    var entries: [ObjectPath: Entry] = [:]
    /// First-touched order (gdbus's `pending` list, used by `g_dbus_flush`).
    var order: [ObjectPath] = []
    /// Last-touched order (the order of the objects' idle sources).
    var idleOrder: [ObjectPath] = []

    mutating func update(_ path: ObjectPath, _ body: (inout Entry) -> Void) {
        if entries[path] == nil {
            entries[path] = Entry()
            order.append(path)
        }
        idleOrder.removeAll { $0 == path }
        idleOrder.append(path)
        body(&entries[path]!)
    }

    mutating func take(_ path: ObjectPath) -> Entry? {
        guard let entry = entries.removeValue(forKey: path) else { return nil }
        order.removeAll { $0 == path }
        idleOrder.removeAll { $0 == path }
        return entry
    }
}
