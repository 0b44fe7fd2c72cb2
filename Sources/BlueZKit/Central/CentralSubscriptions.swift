/// Which connected centrals are subscribed to which characteristics of a peripheral manager.
///
/// BlueZ 5.66 tells a GATT application only that *a* central subscribed
/// (`StartNotify`, called for every Client Characteristic Configuration write
/// that enables notifications) and that the *last* one left (`StopNotify`, also
/// called when the last subscriber's link drops); it does not say which
/// central it was. This table attributes each `StartNotify` to the connected
/// central that is not subscribed yet and was active most recently (it
/// connected, or sent a read or write request, last). With one central — the
/// common case — that is exact; with several subscribing at the same moment
/// the attribution can swap two of them. A subscription is over when its
/// central's link goes down or at `StopNotify`.
///
/// The table also follows indications waiting for confirmations (see
/// ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)``): bluetoothd's `Confirm()`
/// does not say which central confirmed, so each one settles one of the centrals the
/// indication went to, and a central that leaves (its link drops, or `StopNotify`) is not
/// waited for any more.
struct CentralSubscriptions: Sendable {
    /// The address used when no connected central is known (the link event has not arrived).
    static let unknownAddress = "00:00:00:00:00:00"

    private struct Link: Sendable {
        var lastActive: Int
        var mtu: Int?
    }

    /// One characteristic's indication, sent to centrals that have not all confirmed it.
    private struct Confirmations: Sendable {
        let generation: Int
        /// The centrals still to confirm; empty once the wait is over and a refused
        /// update's "ready" is on its way to the delegate.
        var awaited: [String]
        /// An update was refused while waiting: the delegate must hear "ready" before the next one.
        var refused = false
    }

    /// A wait for confirmations that ended (all confirmed, centrals left, or timed out).
    struct EndedWait: Sendable {
        let characteristic: ObjectIdentifier
        let generation: Int
        /// An update was refused during the wait: the delegate is told it is ready.
        let refused: Bool
    }

    private var links: [String: Link] = [:]
    private var subscribers: [ObjectIdentifier: [String]] = [:]
    private var clock = 0
    private var confirmations: [ObjectIdentifier: Confirmations] = [:]
    private var endedWaits: [EndedWait] = []
    private var generations = 0

    /// The addresses of connected centrals.
    var connectedAddresses: Set<String> { Set(links.keys) }

    /// A central's link came up (`Device1.Connected` turned true).
    mutating func connected(_ address: String) {
        clock += 1
        links[address, default: Link(lastActive: clock)].lastActive = clock
    }

    /// A central sent a request; it is connected and the most recently active one.
    mutating func active(_ address: String, mtu: Int?) {
        connected(address)
        if let mtu { links[address]?.mtu = mtu }
    }

    /// The ATT MTU a central's requests reported, if any.
    func mtu(of address: String) -> Int? { links[address]?.mtu }

    /// A central's link went down: it leaves every characteristic it was subscribed to.
    /// Returns those characteristics.
    mutating func disconnected(_ address: String) -> [ObjectIdentifier] {
        links[address] = nil
        for (characteristic, entry) in confirmations where entry.awaited.contains(address) {
            confirmations[characteristic]?.awaited.removeAll { $0 == address }
            if confirmations[characteristic]?.awaited.isEmpty == true { endWait(characteristic) }
        }
        var left: [ObjectIdentifier] = []
        for (characteristic, addresses) in subscribers where addresses.contains(address) {
            left.append(characteristic)
            subscribers[characteristic] = addresses.filter { $0 != address }
        }
        return left
    }

    /// One more central subscribed to `characteristic`: returns the address it is attributed to.
    mutating func subscribe(_ characteristic: ObjectIdentifier) -> String {
        let current = subscribers[characteristic] ?? []
        let address =
            links.filter { !current.contains($0.key) }.max { $0.value.lastActive < $1.value.lastActive }?.key
            ?? Self.unknownAddress
        if !current.contains(address) { subscribers[characteristic] = current + [address] }
        return address
    }

    /// The central at `address` subscribed to `characteristic`, as its own notify socket says
    /// (bluetoothd with per-device sockets). Returns false when it was subscribed already.
    mutating func subscribe(_ characteristic: ObjectIdentifier, address: String) -> Bool {
        let current = subscribers[characteristic] ?? []
        guard !current.contains(address) else { return false }
        subscribers[characteristic] = current + [address]
        return true
    }

    /// The central at `address` left `characteristic` (bluetoothd closed its socket): it is not
    /// waited for any more. Returns false when it was not subscribed.
    mutating func unsubscribe(_ characteristic: ObjectIdentifier, address: String) -> Bool {
        if confirmations[characteristic]?.awaited.contains(address) == true {
            confirmations[characteristic]?.awaited.removeAll { $0 == address }
            if confirmations[characteristic]?.awaited.isEmpty == true { endWait(characteristic) }
        }
        guard let current = subscribers[characteristic], current.contains(address) else { return false }
        subscribers[characteristic] = current.filter { $0 != address }
        return true
    }

    /// The last subscriber left (`StopNotify`): returns everyone still counted as subscribed.
    mutating func unsubscribeAll(_ characteristic: ObjectIdentifier) -> [String] {
        if confirmations[characteristic]?.awaited.isEmpty == false { endWait(characteristic) }
        return subscribers.removeValue(forKey: characteristic) ?? []
    }

    /// The subscribers of `characteristic`, in the order they subscribed.
    func subscribers(of characteristic: ObjectIdentifier) -> [String] { subscribers[characteristic] ?? [] }

    /// Forgets every link and subscription (bluetoothd went away); nobody is waited for any more.
    mutating func reset() -> [ObjectIdentifier: [String]] {
        for (characteristic, entry) in confirmations where !entry.awaited.isEmpty { endWait(characteristic) }
        defer {
            links.removeAll()
            subscribers.removeAll()
        }
        return subscribers
    }

    // MARK: Indication confirmations

    /// Whether an update of `characteristic` must wait for confirmations (or for the delegate to
    /// hear "ready" after the last one); when it must, the wait remembers that it refused one.
    mutating func refusesUpdate(of characteristic: ObjectIdentifier) -> Bool {
        guard let entry = confirmations[characteristic] else { return false }
        if !entry.awaited.isEmpty { confirmations[characteristic]?.refused = true }
        return true
    }

    /// An indication of `characteristic` goes to its subscribers now: waits for one confirmation
    /// from each. Returns the wait's generation (for its timeout), nil when nobody is subscribed.
    mutating func expectConfirmations(of characteristic: ObjectIdentifier) -> Int? {
        let awaited = subscribers(of: characteristic)
        guard !awaited.isEmpty else { return nil }
        generations += 1
        confirmations[characteristic] = Confirmations(generation: generations, awaited: awaited)
        return generations
    }

    /// bluetoothd called `Confirm()`: one of the awaited centrals confirmed. Returns false when
    /// nobody was awaited (a late or stray confirmation, ignored).
    mutating func confirmationArrived(for characteristic: ObjectIdentifier) -> Bool {
        guard confirmations[characteristic]?.awaited.isEmpty == false else { return false }
        confirmations[characteristic]?.awaited.removeFirst()
        if confirmations[characteristic]?.awaited.isEmpty == true { endWait(characteristic) }
        return true
    }

    /// Per central (bluetoothd ≥ 5.80 confirms through each central's socket): whether an update of
    /// `characteristic` to `targets` must wait, because one of them has not confirmed the last
    /// indication (or the delegate is still to hear "ready" after a wait that refused one).
    mutating func refusesUpdate(of characteristic: ObjectIdentifier, to targets: [String]) -> Bool {
        guard let entry = confirmations[characteristic] else { return false }
        if entry.awaited.isEmpty { return true }
        guard entry.awaited.contains(where: targets.contains) else { return false }
        confirmations[characteristic]?.refused = true
        return true
    }

    /// Per central: an indication goes to `targets`, each of which confirms it through its own
    /// socket. Joins a wait in progress (returning nil: its timer runs already), else starts one
    /// and returns its generation; nil too when `targets` is empty.
    mutating func expectConfirmations(of characteristic: ObjectIdentifier, from targets: [String]) -> Int? {
        guard !targets.isEmpty else { return nil }
        if let entry = confirmations[characteristic], !entry.awaited.isEmpty {
            confirmations[characteristic]?.awaited += targets
            return nil
        }
        generations += 1
        confirmations[characteristic] = Confirmations(generation: generations, awaited: targets)
        return generations
    }

    /// Per central: the central at `address` confirmed. Returns false when it was not awaited.
    mutating func confirmationArrived(for characteristic: ObjectIdentifier, from address: String) -> Bool {
        guard let index = confirmations[characteristic]?.awaited.firstIndex(of: address) else { return false }
        confirmations[characteristic]?.awaited.remove(at: index)
        if confirmations[characteristic]?.awaited.isEmpty == true { endWait(characteristic) }
        return true
    }

    /// The ATT transaction timeout passed: the wait of that generation is over.
    mutating func confirmationsTimedOut(for characteristic: ObjectIdentifier, generation: Int) {
        guard let entry = confirmations[characteristic], entry.generation == generation, !entry.awaited.isEmpty
        else { return }
        endWait(characteristic)
    }

    /// The delegate heard "ready" for the wait of that generation: updates go out again.
    mutating func readyDelivered(for characteristic: ObjectIdentifier, generation: Int) {
        guard let entry = confirmations[characteristic], entry.generation == generation, entry.awaited.isEmpty
        else { return }
        confirmations[characteristic] = nil
    }

    /// The waits that ended since the last call.
    mutating func takeEndedWaits() -> [EndedWait] {
        defer { endedWaits.removeAll() }
        return endedWaits
    }

    private mutating func endWait(_ characteristic: ObjectIdentifier) {
        guard let entry = confirmations[characteristic] else { return }
        endedWaits.append(
            EndedWait(characteristic: characteristic, generation: entry.generation, refused: entry.refused))
        if entry.refused {
            confirmations[characteristic]?.awaited = []
        } else {
            confirmations[characteristic] = nil
        }
    }
}
