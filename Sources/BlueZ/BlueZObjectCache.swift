package import DBus
import Locking

/// A client-side mirror of bluetoothd's object tree (`GetManagedObjects` kept
/// current with `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged`),
/// following bluetoothd as it comes and goes on the bus.
///
/// Threading: the cache lives on its connection's queue. `events` is called
/// there, in bus order, after the cache was updated, so a handler that reads
/// `objects` sees the state the event describes. Signals that arrive while a
/// `GetManagedObjects` is outstanding are held: once the reply is in, those
/// bluetoothd sent after it (a larger serial: one connection numbers its
/// messages in the order it sends them) are applied in order, and those sent
/// before it are dropped, since the reply already contains their effect.
///
/// A failed `GetManagedObjects` is reported (`loadFailed`) and tried again for as long as
/// bluetoothd stays on the bus; `loadError` keeps the last failure (AccessDenied: the bus policy
/// does not let this user talk to bluetoothd). A load that more signals arrive during than it
/// may hold starts again. Either restart waits first, 100 ms doubling up to 5 s while loads keep
/// failing or overflowing (`BlueZObjectCache+Restart.swift`): a storm of signals or a failing
/// bluetoothd cannot make the cache ask for the whole tree in a tight loop.
///
/// `Sendable` as the compiler checks it: what changes on the connection's queue (`objects`,
/// `generation`, `isLoaded`, `loadError`, `heldSignals`, `restartsInARow`, the value slots) is
/// in a `QueueBound` that checks the queue on every access; `restartTimer` (set by tests before
/// ``start()``) and the subscriptions are behind locks.
package final class BlueZObjectCache: Sendable {
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
        /// Only `Value` of a characteristic or descriptor changed (and no route took the signal:
        /// `BlueZClient+ValueRoutes.swift`).
        case valueChanged(ObjectPath, interface: String, [UInt8])
        /// bluetoothd is on the bus but `GetManagedObjects` failed; tried again later.
        case loadFailed(DBusError)
    }

    /// The signal handlers, for signals held during a load.
    enum SignalKind {
        case interfacesAdded, interfacesRemoved, propertiesChanged
    }

    let connection: DBusConnection
    private let events: @Sendable (Event) -> Void

    /// What the cache keeps on the connection's queue.
    struct State {
        var objects: [ObjectPath: Interfaces] = [:]
        /// Changes made through ``objects`` (a slot looks its object up again after one).
        var shapeVersion = 0
        /// The routes' value slots by index, nil where one ended (`BlueZObjectCache+ValueSlots.swift`).
        var valueSlots: [ValueSlot?] = []
        /// The slots with a value not yet written into `objects`, in the order they got one.
        var pendingSlots: [Int] = []
        var isLoaded = false
        var loadError: DBusError?
        var generation = 0
        var heldSignals: [(SignalKind, DBusMessage)]?
        var restartsInARow = 0
    }
    /// The cache's state, on `connection.queue` (checked on every access).
    let state: QueueBound<State>

    /// The mirrored tree (on the queue). Routed values waiting in their slots are written into it
    /// first, whether it is read or changed.
    private(set) package var objects: [ObjectPath: Interfaces] {
        get {
            if !state.value.pendingSlots.isEmpty { Self.flushPendingValues(&state.value) }
            return state.value.objects
        }
        _modify {
            Self.flushPendingValues(&state.value)
            state.value.shapeVersion &+= 1
            yield &state.value.objects
        }
    }
    /// True between a successful load and bluetoothd leaving (on the queue).
    private(set) package var isLoaded: Bool {
        get { state.value.isLoaded }
        _modify { yield &state.value.isLoaded }
    }
    /// Why the last `GetManagedObjects` failed; nil once one succeeded or bluetoothd left (on the queue).
    private(set) package var loadError: DBusError? {
        get { state.value.loadError }
        _modify { yield &state.value.loadError }
    }
    private var generation: Int {
        get { state.value.generation }
        _modify { yield &state.value.generation }
    }
    /// Signals received while a load is outstanding (nil when none is).
    private var heldSignals: [(SignalKind, DBusMessage)]? {
        get { state.value.heldSignals }
        _modify { yield &state.value.heldSignals }
    }
    /// More held signals than this (a storm during a slow load) start the load again.
    package static let maximumHeldSignals = 4096
    /// Loads restarted (after a failure or an overflow) since one last succeeded or bluetoothd
    /// changed: the back-off's step (on the queue).
    private(set) package var restartsInARow: Int {
        get { state.value.restartsInARow }
        _modify { yield &state.value.restartsInARow }
    }
    private let timer = PosixMutex<RestartTimer>(BlueZObjectCache.sleepingTimer)
    /// Runs a restart after its wait; set before ``start()`` (tests stand in for the clock).
    package var restartTimer: RestartTimer {
        get { timer.withLock { $0 } }
        set { timer.withLock { $0 = newValue } }
    }
    private let subscriptions = PosixMutex<[DBusSubscription]>([])
    /// The interfaces whose `PropertiesChanged` the cache follows; nil for all of them.
    let propertyInterfaces: [InterfaceName]?

    /// A cache on `connection`. With `propertyInterfaces`, only those interfaces' property
    /// changes are subscribed to (one match rule each, `arg0` = the interface: the bus sends
    /// nothing else): the properties of other interfaces stay as `GetManagedObjects` and
    /// `InterfacesAdded` gave them. A peripheral role needs no remote characteristic's `Value`,
    /// and each one would cost it a wake-up and a decode.
    package init(
        connection: DBusConnection, propertyInterfaces: [InterfaceName]? = nil,
        events: @escaping @Sendable (Event) -> Void
    ) {
        self.connection = connection
        self.propertyInterfaces = propertyInterfaces
        self.events = events
        self.state = QueueBound(State(), queue: connection.queue)
    }

    /// Subscribes to bluetoothd's signals and its name owner; loads the tree
    /// whenever bluetoothd is present. Returns once subscribed (the first load
    /// is reported as `.loaded`, or nothing if bluetoothd is absent).
    package func start() async throws(DBusError) {
        let service = BlueZNames.service
        let added = try await connection.subscribe(
            DBusMatchRule(sender: service, interface: .objectManager, member: "InterfacesAdded")
        ) { [weak self] message in self?.interfacesAdded(message) }
        subscriptions.withLock { $0.append(added) }
        let removed = try await connection.subscribe(
            DBusMatchRule(sender: service, interface: .objectManager, member: "InterfacesRemoved")
        ) { [weak self] message in self?.interfacesRemoved(message) }
        subscriptions.withLock { $0.append(removed) }
        for interface in propertyInterfaces.map({ $0.map(\.rawValue) }) ?? [nil] {
            let changed = try await connection.subscribe(
                DBusMatchRule(
                    sender: service, pathNamespace: BlueZNames.root, interface: .properties,
                    member: DBusMessage.propertiesChangedMember, arg0: interface)
            ) { [weak self] message in self?.propertiesChanged(message) }
            subscriptions.withLock { $0.append(changed) }
        }
        let owner = try await connection.watchNameOwner(service) { [weak self] owner in self?.ownerChanged(owner) }
        subscriptions.withLock { $0.append(owner) }
    }

    /// Stops following bluetoothd (any thread).
    package func stop() {
        let stopped = subscriptions.withLock { subscriptions in
            defer { subscriptions.removeAll() }
            return subscriptions
        }
        for subscription in stopped { subscription.cancel() }
    }

    /// The paths of objects that have `interface`, sorted.
    package func paths(with interface: InterfaceName) -> [ObjectPath] {
        objects.filter { $0.value[interface.rawValue] != nil }.keys.sorted()
    }

    /// The properties of `interface` on `path`, if the object has it.
    func properties(_ interface: InterfaceName, at path: ObjectPath) -> [String: DBusValue]? {
        objects[path]?[interface.rawValue]
    }

    // MARK: On the queue

    private func ownerChanged(_ owner: BusName?) {
        generation += 1
        let wasLoaded = isLoaded
        objects.removeAll()
        isLoaded = false
        loadError = nil
        heldSignals = nil
        restartsInARow = 0
        if wasLoaded || owner == nil { events(.vanished) }
        guard owner != nil else { return }
        load()
    }

    /// Asks bluetoothd for its whole tree, holding the signals that arrive meanwhile.
    private func load() {
        generation += 1
        heldSignals = []
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
        let held = heldSignals ?? []
        heldSignals = nil
        let failure: DBusError
        switch result {
        case .success(let reply):
            if let tree = Self.decodeManagedObjects(reply: reply) {
                objects = tree
                isLoaded = true
                loadError = nil
                restartsInARow = 0
                events(.loaded)
                for (kind, message) in held where message.serial > reply.serial { apply(kind, message) }
                return
            }
            failure = DBusError(.invalidArgs, "bluetoothd's GetManagedObjects reply has an unexpected shape")
        case .failure(let error):
            failure = error
        }
        loadError = failure
        DBusLog.warning("GetManagedObjects on bluetoothd failed (\(failure)); trying again")
        events(.loadFailed(failure))
        restartLoad()
    }

    /// Drops the load under way (its signals too: the next tree has their effect) and starts
    /// another after the back-off's next wait; signals meanwhile are dropped for the same reason.
    private func restartLoad() {
        generation += 1
        heldSignals = nil
        restartsInARow += 1
        let expected = generation
        let queue = connection.queue
        restartTimer(Self.restartDelay(afterRestarts: restartsInARow)) { [weak self] in
            queue.async { [weak self] in
                guard let self, expected == self.generation else { return }
                self.load()
            }
        }
    }

    /// Whether a signal was held for the load under way (true) or is to be applied now.
    private func held(_ kind: SignalKind, _ message: DBusMessage) -> Bool {
        guard !isLoaded, heldSignals != nil else { return false }
        heldSignals!.append((kind, message))
        if heldSignals!.count > Self.maximumHeldSignals {
            DBusLog.warning("too many signals during GetManagedObjects; loading bluetoothd's tree again")
            restartLoad()
        }
        return true
    }

    private func apply(_ kind: SignalKind, _ message: DBusMessage) {
        switch kind {
        case .interfacesAdded: interfacesAdded(message)
        case .interfacesRemoved: interfacesRemoved(message)
        case .propertiesChanged: propertiesChanged(message)
        }
    }

    private func interfacesAdded(_ message: DBusMessage) {
        guard !held(.interfacesAdded, message) else { return }
        guard isLoaded, let args = try? message.arguments(), args.count == 2,
            let path = args[0].objectPathValue, let added = Self.decodeInterfaces(args[1])
        else { return }
        objects[path, default: [:]].merge(added) { _, new in new }
        events(.interfacesAdded(path, added))
    }

    private func interfacesRemoved(_ message: DBusMessage) {
        guard !held(.interfacesRemoved, message) else { return }
        guard isLoaded, let args = try? message.arguments(), args.count == 2,
            let path = args[0].objectPathValue, let removed = args[1].stringArrayValue
        else { return }
        for interface in removed { objects[path]?[interface] = nil }
        if objects[path]?.isEmpty == true { objects[path] = nil }
        events(.interfacesRemoved(path, removed))
    }

    private func propertiesChanged(_ message: DBusMessage) {
        guard !held(.propertiesChanged, message), isLoaded else { return }
        // A value notified through StartNotify, or read, that no route claimed
        // (`BlueZClient+ValueRoutes.swift`): stored, and reported as a value change.
        if let (interface, bytes) = Self.valueChange(message) {
            guard let path = message.path, Self.storeValue(bytes, at: path, interface: interface, in: &objects) else {
                return
            }
            return events(.valueChanged(path, interface: interface.rawValue, bytes))
        }
        guard let path = message.path, let index = objects.index(forKey: path), let change = message.propertiesChange(),
            objects.values[index][change.interface] != nil
        else { return }
        for (name, value) in change.changed { objects.values[index][change.interface]![name] = value }
        for name in change.invalidated { objects.values[index][change.interface]![name] = nil }
        events(
            .propertiesChanged(
                path, interface: change.interface, changed: change.changed, invalidated: change.invalidated))
    }

    /// What ``takeValue(_:slot:)`` did with a signal.
    package enum ValueTake {
        /// The signal was the object's new `Value`, now stored: these bytes.
        case value([UInt8])
        /// The signal was a `Value` of an object (or interface) the cache lacks: dropped, as the
        /// general path drops it.
        case dropped
        /// Another shape, or no tree is loaded: for the general path (which holds signals during
        /// a load).
        case notTaken
    }

    static let valueProperty = "Value"

    /// A characteristic's or descriptor's new `Value` and nothing else, with its interface.
    private static func valueChange(_ message: DBusMessage) -> (InterfaceName, [UInt8])? {
        if let bytes = message.propertiesChangedValueBytes(of: BlueZNames.gattCharacteristic) {
            return (BlueZNames.gattCharacteristic, bytes)
        }
        if let bytes = message.propertiesChangedValueBytes(of: BlueZNames.gattDescriptor) {
            return (BlueZNames.gattDescriptor, bytes)
        }
        return nil
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
    static func decodeInterfaces(_ value: DBusValue) -> Interfaces? {
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
