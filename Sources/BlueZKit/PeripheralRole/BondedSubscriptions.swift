/// The subscriptions of bonded centrals, kept across their links, as bluetoothd keeps them.
///
/// bluetoothd keeps a bonded device's Client Characteristic Configuration values when its link
/// drops (`att_disconnected` in `src/gatt-database.c` returns early for a paired device), and
/// takes the central's write of the same value after it reconnected as no change
/// (`gatt_ccc_write_cb`): the application is not asked again, with `StartNotify` or
/// `AcquireNotify`. Core Bluetooth keeps a bonded central's subscription across links too. So
/// when a bonded central's link drops, the manager remembers what it was subscribed to, and
/// under which registration (a service registered again has new attributes, whose CCC values
/// bluetoothd does not carry over); when the link is back it reports the central subscribed again.
///
/// On bluetoothd 5.79 and later the central's notify socket closes with the link and is not
/// opened again: until it is, values for the characteristic go out as `PropertiesChanged`,
/// which bluetoothd sends to every device whose CCC is set (``withoutSocket(_:)``).
///
/// The socket closing and `Device1.Connected` turning false race: a socket closed at most
/// ``linkDropWindow`` before the link was seen to drop counts as closed by the drop.
///
/// Pure state, owned by the peripheral manager's engine state (its bus queue); instants are
/// passed in.
struct BondedSubscriptions: Sendable {
    /// How long before `Connected` turned false a closed notify socket still counts as closed by the link drop.
    static let linkDropWindow: Duration = .seconds(3)

    /// A characteristic, and the registration (GATT application) it was subscribed under.
    struct Entry: Sendable, Hashable {
        let characteristic: ObjectIdentifier
        let registration: ObjectIdentifier
    }

    private struct ClosedSocket: Sendable {
        let entry: Entry
        let at: ContinuousClock.Instant
    }

    /// Sockets that closed lately, by central address: the link may be about to drop.
    private var closedSockets: [String: [ClosedSocket]] = [:]
    /// The subscriptions of bonded centrals whose link is down, by central address.
    private var remembered: [String: Set<Entry>] = [:]
    /// Centrals back with their subscription but without a socket, by characteristic.
    private var withoutSocket: [ObjectIdentifier: Set<String>] = [:]

    /// The central at `address` lost its notify socket for `entry` (it unsubscribed, or its link
    /// is dropping).
    mutating func socketClosed(address: String, entry: Entry, at now: ContinuousClock.Instant) {
        prune(now)
        closedSockets[address, default: []].append(ClosedSocket(entry: entry, at: now))
    }

    /// The central at `address` got a notify socket for `characteristic`: values reach it there again.
    mutating func socketOpened(address: String, characteristic: ObjectIdentifier) {
        withoutSocket[characteristic]?.remove(address)
        if withoutSocket[characteristic]?.isEmpty == true { withoutSocket[characteristic] = nil }
    }

    /// The link of the central at `address` dropped while it was subscribed to `subscribed`.
    /// A bonded central's subscriptions are remembered, with those whose socket closed within
    /// ``linkDropWindow`` before; anything else known of the central is forgotten.
    mutating func linkDropped(
        address: String, bonded: Bool, subscribed: [Entry], at now: ContinuousClock.Instant
    ) {
        prune(now)
        let closed = closedSockets.removeValue(forKey: address) ?? []
        unsubscribedEverywhere(address)
        guard bonded else {
            remembered[address] = nil
            return
        }
        let entries = Set(subscribed).union(closed.map(\.entry))
        remembered[address] = entries.isEmpty ? nil : entries
    }

    /// The link of the central at `address` is back: returns what it was subscribed to (each
    /// once), and forgets it.
    mutating func linkReturned(address: String) -> [Entry] {
        closedSockets[address] = nil
        return Array(remembered.removeValue(forKey: address) ?? [])
    }

    /// The returned central at `address` is subscribed to `characteristic` again without a socket.
    mutating func returnedWithoutSocket(address: String, characteristic: ObjectIdentifier) {
        withoutSocket[characteristic, default: []].insert(address)
    }

    /// The central at `address` is no longer subscribed to `characteristic`.
    mutating func unsubscribed(address: String, characteristic: ObjectIdentifier) {
        socketOpened(address: address, characteristic: characteristic)
    }

    /// The subscribers of `characteristic` that came back without a socket: a value for one of
    /// them goes out as `PropertiesChanged`, which reaches every subscriber.
    func withoutSocket(_ characteristic: ObjectIdentifier) -> Set<String> { withoutSocket[characteristic] ?? [] }

    /// The central at `address` is not bonded any more, or its device is gone: nothing of it is kept.
    mutating func forget(address: String) {
        closedSockets[address] = nil
        remembered[address] = nil
        unsubscribedEverywhere(address)
    }

    /// bluetoothd or the adapter went away: its CCC values are not ours to count on.
    mutating func reset() {
        closedSockets.removeAll()
        remembered.removeAll()
        withoutSocket.removeAll()
    }

    private mutating func unsubscribedEverywhere(_ address: String) {
        for characteristic in Array(withoutSocket.keys) {
            unsubscribed(address: address, characteristic: characteristic)
        }
    }

    /// Drops closed sockets older than the window.
    private mutating func prune(_ now: ContinuousClock.Instant) {
        for address in Array(closedSockets.keys) {
            closedSockets[address]?.removeAll { now - $0.at > Self.linkDropWindow }
            if closedSockets[address]?.isEmpty == true { closedSockets[address] = nil }
        }
    }
}
