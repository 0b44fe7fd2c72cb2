import BlueZ
import DBus
import Dispatch
public import Foundation

/// Subscriptions of centrals and sending values to them, with back-pressure.
extension PeripheralManager {
    /// More queued than this and ``updateValue(_:for:onSubscribedCentrals:)`` says "not now".
    static let backlogLimit = DBusConnection.Backlog(queuedMessages: 64, outgoingBytes: 64 * 1024)

    /// Sends `value` to the centrals subscribed to `characteristic` (`PropertiesChanged` on its
    /// `Value`; bluetoothd notifies or indicates each subscriber, as the characteristic's flags say).
    ///
    /// Returns false, sending nothing, when the value cannot be queued now: the bus has not taken
    /// what was sent before (more than 64 signals or 64 KiB waiting), the characteristic is not
    /// published, or the manager has no connection yet. After a false for back-pressure, every
    /// update returns false until the delegate's
    /// ``PeripheralManagerDelegate/peripheralManagerIsReady(toUpdateSubscribers:)`` (called on
    /// `queue` once half the backlog is gone); send the value again then.
    ///
    /// BlueZ sends the value to every subscriber of the characteristic: `centrals` (Core
    /// Bluetooth's per-central selection) is honoured only as far as nil or a list that holds at
    /// least one subscriber sending to all; a list with no subscriber in it sends nothing and
    /// returns true. A value longer than the smallest subscriber's ``Central/maximumUpdateValueLength``
    /// is truncated by bluetoothd for that central, as Core Bluetooth does.
    @discardableResult
    public func updateValue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?
    )
        -> Bool
    {
        let (target, client) = shared.withLock { ($0.characteristics[ObjectIdentifier(characteristic)], $0.client) }
        guard let (application, id) = target, let client else { return false }
        if let centrals, Set(centrals).isDisjoint(with: characteristic.subscribedCentrals ?? []) { return true }
        // Once refused, refuse until the delegate heard isReady, so that values keep their order.
        if shared.withLock({ $0.roomTimer != nil }) { return false }
        let backlog = client.connection.backlog
        if backlog.queuedMessages >= Self.backlogLimit.queuedMessages
            || backlog.outgoingBytes >= Self.backlogLimit.outgoingBytes
        {
            waitForRoom(on: client.connection)
            return false
        }
        application.notify(id, value: Array(value))
        return true
    }

    /// Polls the backlog every 5 ms while an update was refused, then tells the delegate once.
    private func waitForRoom(on connection: DBusConnection) {
        let timer: (any DispatchSourceTimer)? = shared.withLock { state in
            guard state.roomTimer == nil else { return nil }
            let timer = DispatchSource.makeTimerSource(queue: connection.queue)
            state.roomTimer = timer
            return timer
        }
        guard let timer else { return }
        timer.setEventHandler { [weak self, weak connection] in
            guard let self, let connection else { return timer.cancel() }
            let backlog = connection.backlog
            guard backlog.queuedMessages < Self.backlogLimit.queuedMessages / 2,
                backlog.outgoingBytes < Self.backlogLimit.outgoingBytes / 2 || !connection.isOpen
            else { return }
            timer.cancel()
            self.queue.async {
                self.shared.withLock { $0.roomTimer = nil }
                self.delegate?.peripheralManagerIsReady(toUpdateSubscribers: self)
            }
        }
        timer.schedule(deadline: .now() + .milliseconds(5), repeating: .milliseconds(5), leeway: .milliseconds(2))
        timer.resume()
    }

    // MARK: Events (on the connection's queue)

    /// bluetoothd called `StartNotify` (`isOn`) or `StopNotify` on `characteristic`.
    func notifyingChanged(_ characteristic: MutableCharacteristic, isOn: Bool) {
        let key = ObjectIdentifier(characteristic)
        let (changes, adapter): ([String], String) = shared.withLock { state in
            state.published[key] = characteristic
            let changes = isOn ? [state.subscriptions.subscribe(key)] : state.subscriptions.unsubscribeAll(key)
            return (changes, state.adapterAddress)
        }
        report(isOn ? .subscribed : .unsubscribed, addresses: changes, of: characteristic, adapter: adapter)
    }

    /// A device of our adapter changed: follow the links of centrals.
    func centralLinkChanged(address: String, connected: Bool) {
        let (left, adapter): ([MutableCharacteristic], String) = shared.withLock { state in
            if connected {
                state.subscriptions.connected(address)
                return ([], state.adapterAddress)
            }
            let keys = state.subscriptions.disconnected(address)
            return (keys.compactMap { state.published[$0] }, state.adapterAddress)
        }
        for characteristic in left { report(.unsubscribed, addresses: [address], of: characteristic, adapter: adapter) }
    }

    /// A read or write came from `address`.
    func centralWasActive(address: String, mtu: Int?) {
        shared.withLock { $0.subscriptions.active(address, mtu: mtu) }
    }

    /// bluetoothd left or the adapter went away: every subscription ends.
    func dropAllSubscriptions() {
        let (ended, adapter): ([(MutableCharacteristic, [String])], String) = shared.withLock { state in
            let table = state.subscriptions.reset()
            return (
                table.compactMap { key, addresses in state.published[key].map { ($0, addresses) } },
                state.adapterAddress
            )
        }
        for (characteristic, addresses) in ended {
            report(.unsubscribed, addresses: addresses, of: characteristic, adapter: adapter)
        }
    }

    /// The `Central` object for an address, with the MTU its requests reported (23 when none did).
    func central(address: String, adapter: String) -> Central {
        let mtu = shared.withLock { $0.subscriptions.mtu(of: address) } ?? 23
        return Central(
            identifier: PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: address),
            maximumUpdateValueLength: mtu - 3)
    }

    private enum SubscriptionChange { case subscribed, unsubscribed }

    private func report(
        _ change: SubscriptionChange, addresses: [String], of characteristic: MutableCharacteristic, adapter: String
    ) {
        guard !addresses.isEmpty else { return }
        let centrals = addresses.map { central(address: $0, adapter: adapter) }
        let current = shared.withLock { $0.subscriptions.subscribers(of: ObjectIdentifier(characteristic)) }
            .map { central(address: $0, adapter: adapter) }
        characteristic.setSubscribedCentrals(current)
        queue.async {
            guard let delegate = self.delegate else { return }
            for central in centrals {
                switch change {
                case .subscribed: delegate.peripheralManager(self, central: central, didSubscribeTo: characteristic)
                case .unsubscribed:
                    delegate.peripheralManager(self, central: central, didUnsubscribeFrom: characteristic)
                }
            }
        }
    }
}
