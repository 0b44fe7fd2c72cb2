package import DBus

/// A client-side mirror of bluetoothd's object tree (`GetManagedObjects` kept
/// current with `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged`),
/// following bluetoothd as it comes and goes on the bus.
///
/// Threading: the cache lives on its connection's queue. `events` is called
/// there, in bus order, after the cache was updated, so a handler that reads
/// `objects` sees the state the event describes. Signals that arrive while a
/// `GetManagedObjects` is outstanding are dropped: bluetoothd answers in
/// order, so the reply already contains their effect.
///
/// The invariant behind `@unchecked Sendable`: `objects`, `generation` and
/// `isLoaded` are touched only on `connection.queue`.
package final class BlueZObjectCache: @unchecked Sendable {
    /// Interface name → property name → value (variants unwrapped).
    package typealias Interfaces = [String: [String: DBusValue]]

    /// What changed, after the cache applied it.
    package enum Event: Sendable {
        /// bluetoothd (re)appeared and the whole tree was loaded.
        case loaded
        /// bluetoothd is not on the bus (reported first when it is absent at
        /// start, and whenever it leaves): the cache is empty.
        case vanished
        case interfacesAdded(ObjectPath, Interfaces)
        case interfacesRemoved(ObjectPath, [String])
        case propertiesChanged(ObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String])
        /// The fast path: only `Value` of a characteristic or descriptor changed.
        case valueChanged(ObjectPath, interface: String, [UInt8])
    }

    package let connection: DBusConnection
    private let events: @Sendable (Event) -> Void
    private(set) package var objects: [ObjectPath: Interfaces] = [:]
    /// True between a successful load and bluetoothd leaving.
    private(set) package var isLoaded = false
    private var generation = 0
    private var subscriptions: [DBusSubscription] = []

    package init(connection: DBusConnection, events: @escaping @Sendable (Event) -> Void) {
        self.connection = connection
        self.events = events
    }

    /// Subscribes to bluetoothd's signals and its name owner; loads the tree
    /// whenever bluetoothd is present. Returns once subscribed (the first load
    /// is reported as `.loaded`, or nothing if bluetoothd is absent).
    package func start() async throws(DBusError) {
        let service = BlueZNames.service
        subscriptions.append(
            try await connection.subscribe(
                DBusMatchRule(sender: service, interface: .objectManager, member: "InterfacesAdded")
            ) { [weak self] message in self?.interfacesAdded(message) })
        subscriptions.append(
            try await connection.subscribe(
                DBusMatchRule(sender: service, interface: .objectManager, member: "InterfacesRemoved")
            ) { [weak self] message in self?.interfacesRemoved(message) })
        subscriptions.append(
            try await connection.subscribe(
                DBusMatchRule(
                    sender: service, pathNamespace: BlueZNames.root, interface: .properties,
                    member: DBusMessage.propertiesChangedMember)
            ) { [weak self] message in self?.propertiesChanged(message) })
        subscriptions.append(
            try await connection.watchNameOwner(service) { [weak self] owner in self?.ownerChanged(owner) })
    }

    /// Stops following bluetoothd.
    package func stop() {
        for subscription in subscriptions { subscription.cancel() }
        subscriptions.removeAll()
    }

    /// The paths of objects that have `interface`, sorted.
    package func paths(with interface: InterfaceName) -> [ObjectPath] {
        objects.filter { $0.value[interface.rawValue] != nil }.keys.sorted()
    }

    /// The properties of `interface` on `path`, if the object has it.
    package func properties(_ interface: InterfaceName, at path: ObjectPath) -> [String: DBusValue]? {
        objects[path]?[interface.rawValue]
    }

    // MARK: On the queue

    private func ownerChanged(_ owner: BusName?) {
        generation += 1
        let wasLoaded = isLoaded
        objects.removeAll()
        isLoaded = false
        if wasLoaded || owner == nil { events(.vanished) }
        guard owner != nil else { return }
        let expected = generation
        Task { [weak self] in
            guard let self else { return }
            let result: Result<DBusMessage, DBusError>
            do throws(DBusError) {
                result = .success(
                    try await connection.call(
                        DBusMessage.methodCall(
                            destination: BlueZNames.service, path: .root, interface: .objectManager,
                            member: "GetManagedObjects")))
            } catch { result = .failure(error) }
            connection.queue.async { self.finishLoad(result, generation: expected) }
        }
    }

    private func finishLoad(_ result: Result<DBusMessage, DBusError>, generation expected: Int) {
        guard expected == generation else { return }
        switch result {
        case .success(let reply):
            guard let tree = Self.decodeManagedObjects(reply: reply) else {
                DBusLog.warning("bluetoothd's GetManagedObjects reply has an unexpected shape; ignored")
                return
            }
            objects = tree
            isLoaded = true
            events(.loaded)
        case .failure(let error):
            DBusLog.warning("GetManagedObjects on bluetoothd failed: \(error)")
        }
    }

    private func interfacesAdded(_ message: DBusMessage) {
        guard isLoaded, let args = try? message.arguments(), args.count == 2,
            let path = args[0].objectPathValue, let added = Self.decodeInterfaces(args[1])
        else { return }
        objects[path, default: [:]].merge(added) { _, new in new }
        events(.interfacesAdded(path, added))
    }

    private func interfacesRemoved(_ message: DBusMessage) {
        guard isLoaded, let args = try? message.arguments(), args.count == 2,
            let path = args[0].objectPathValue, let removed = args[1].stringArrayValue
        else { return }
        for interface in removed { objects[path]?[interface] = nil }
        if objects[path]?.isEmpty == true { objects[path] = nil }
        events(.interfacesRemoved(path, removed))
    }

    private func propertiesChanged(_ message: DBusMessage) {
        guard isLoaded, let path = message.path, objects[path] != nil else { return }
        for interface in [BlueZNames.gattCharacteristic, BlueZNames.gattDescriptor] {
            if let bytes = message.propertiesChangedValueBytes(of: interface) {
                guard objects[path]?[interface.rawValue] != nil else { return }
                objects[path]![interface.rawValue]!["Value"] = .bytes(bytes)
                return events(.valueChanged(path, interface: interface.rawValue, bytes))
            }
        }
        guard let change = message.propertiesChange(), objects[path]?[change.interface] != nil else { return }
        for (name, value) in change.changed { objects[path]![change.interface]![name] = value }
        for name in change.invalidated { objects[path]![change.interface]![name] = nil }
        events(
            .propertiesChanged(
                path, interface: change.interface, changed: change.changed, invalidated: change.invalidated))
    }

    // MARK: Decoding

    /// A `GetManagedObjects` reply → the tree; nil when its shape is wrong. Decoded
    /// from the body bytes by `DBusBodyDecoder` (a thousand devices make a reply of
    /// about a megabyte, where `DBusMessageIter` is slow); the same tree as
    /// `decodeManagedObjects(_:)` of the reply's first argument.
    /// Any other signature (variants where bluetoothd has none) takes the general path.
    package static func decodeManagedObjects(reply: DBusMessage) -> [ObjectPath: Interfaces]? {
        if reply.signature == "a{oa{sa{sv}}}", let tree = try? reply.managedObjects() { return tree }
        return (try? reply.arguments())?.first.flatMap(decodeManagedObjects)
    }

    /// `a{oa{sa{sv}}}` → the tree; nil when the shape is wrong.
    package static func decodeManagedObjects(_ value: DBusValue) -> [ObjectPath: Interfaces]? {
        guard let entries = value.dictionaryEntries else { return nil }
        var tree: [ObjectPath: Interfaces] = [:]
        tree.reserveCapacity(entries.count)
        for entry in entries {
            guard case .objectPath(let path) = entry.key, let interfaces = decodeInterfaces(entry.value) else {
                return nil
            }
            tree[path] = interfaces
        }
        return tree
    }

    /// `a{sa{sv}}` → interfaces with their properties; nil when the shape is wrong.
    package static func decodeInterfaces(_ value: DBusValue) -> Interfaces? {
        guard let entries = value.dictionaryEntries else { return nil }
        var interfaces: Interfaces = [:]
        for entry in entries {
            guard case .string(let name) = entry.key, let properties = entry.value.stringKeyedDictionary else {
                return nil
            }
            interfaces[name] = properties.mapValues(\.unwrappingVariants)
        }
        return interfaces
    }
}
