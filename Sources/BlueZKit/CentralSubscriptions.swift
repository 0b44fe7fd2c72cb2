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
struct CentralSubscriptions: Sendable {
    /// The address used when no connected central is known (the link event has not arrived).
    static let unknownAddress = "00:00:00:00:00:00"

    private struct Link: Sendable {
        var lastActive: Int
        var mtu: Int?
    }

    private var links: [String: Link] = [:]
    private var subscribers: [ObjectIdentifier: [String]] = [:]
    private var clock = 0

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

    /// The last subscriber left (`StopNotify`): returns everyone still counted as subscribed.
    mutating func unsubscribeAll(_ characteristic: ObjectIdentifier) -> [String] {
        subscribers.removeValue(forKey: characteristic) ?? []
    }

    /// The subscribers of `characteristic`, in the order they subscribed.
    func subscribers(of characteristic: ObjectIdentifier) -> [String] { subscribers[characteristic] ?? [] }

    /// Forgets every link and subscription (bluetoothd went away).
    mutating func reset() -> [ObjectIdentifier: [String]] {
        defer {
            links.removeAll()
            subscribers.removeAll()
        }
        return subscribers
    }
}
