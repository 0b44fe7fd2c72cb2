import BlueZ
import Foundation

/// Bonded centrals keep their subscriptions across links (see `BondedSubscriptions`).
extension PeripheralEngine {
    /// The link of the central at `address` is back (on the connection's queue): a bonded
    /// central is subscribed again to what it was subscribed to when its link dropped, and the
    /// delegate hears `didSubscribeTo` for each (bluetoothd does not ask the application again).
    func centralLinkCameBack(address: String) {
        let (back, adapter) = sync { state in
            (state.resubscribeReturning(address), state.adapterAddress)
        }
        for characteristic in back {
            report(.subscribed, addresses: [address], of: characteristic, adapter: adapter)
        }
    }

    /// The central at `address` is not bonded any more, or its device is gone.
    func centralBondRemoved(address: String) {
        sync { $0.bonded.forget(address: address) }
    }

    /// Whether a value for `key` goes out as `PropertiesChanged` rather than through sockets: a
    /// bonded central it goes to (one of `centrals`, or any subscriber when nil) came back
    /// without a socket. bluetoothd sends the signal's value to every device whose CCC is set,
    /// those with sockets included, so the sockets are skipped for that value.
    func sendsAsSignal(_ key: ObjectIdentifier, to centrals: [Central]?) -> Bool {
        let (waiting, adapter) = sync { ($0.bonded.withoutSocket(key), $0.adapterAddress) }
        guard !waiting.isEmpty else { return false }
        guard let centrals else { return true }
        let wanted = Set(centrals.map(\.identifier))
        return waiting.contains {
            wanted.contains(PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: $0))
        }
    }
}

extension PeripheralEngine.State {
    /// The registration `key` is published under, as remembered for a bonded central.
    func bondedEntry(_ key: ObjectIdentifier) -> BondedSubscriptions.Entry? {
        characteristics[key].map {
            BondedSubscriptions.Entry(characteristic: key, registration: ObjectIdentifier($0.0))
        }
    }

    /// The link of the central at `address` dropped, taking it off `keys`: remembered when it is bonded.
    mutating func linkDropped(_ address: String, leaving keys: [ObjectIdentifier], bonded: Bool) {
        self.bonded.linkDropped(
            address: address, bonded: bonded, subscribed: keys.compactMap(bondedEntry), at: .now)
    }

    /// The central at `address` is connected: returns the characteristics it is subscribed to
    /// again, those it was subscribed to when its bonded link dropped and that are still
    /// published under the same registration. Those offering sockets get values as
    /// `PropertiesChanged` until the central has a socket again.
    mutating func resubscribeReturning(_ address: String) -> [MutableCharacteristic] {
        subscriptions.connected(address)
        var back: [MutableCharacteristic] = []
        for entry in bonded.linkReturned(address: address) {
            let key = entry.characteristic
            guard bondedEntry(key) == entry, let characteristic = published[key],
                subscriptions.subscribe(key, address: address)
            else { continue }
            if socketCharacteristics.contains(key), notifyLinks[key]?[address] == nil {
                bonded.returnedWithoutSocket(address: address, characteristic: key)
            }
            back.append(characteristic)
        }
        return back
    }
}
