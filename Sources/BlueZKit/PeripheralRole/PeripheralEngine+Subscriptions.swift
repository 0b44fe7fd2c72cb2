import BlueZ
import Dispatch
import Foundation

/// Subscriptions of centrals and sending values to them, with back-pressure: the engine's work,
/// on the bus queue (the public `updateValue` and its documentation are the manager's).
extension PeripheralEngine {
    /// ``updateValue(_:for:onSubscribedCentrals:)`` once the length is checked, on the bus queue.
    func updateValueOnBusQueue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?
    ) -> PeripheralManager.UpdateOutcome {
        let key = ObjectIdentifier(characteristic)
        let (target, client, adapter) = sync {
            ($0.characteristics[key], $0.client, $0.adapterAddress)
        }
        guard let client else { return .refused(.busAway) }
        guard let (application, id) = target else { return .refused(.notPublished) }
        // The bus is away (the state is `.resetting`): nothing sent now could arrive.
        guard client.isBusOpen else { return .refused(.busAway) }
        if let centrals, Set(centrals).isDisjoint(with: characteristic.subscribedCentrals ?? []) { return .sent }
        if let (address, limit) = tightestLimit(of: key, for: centrals, adapter: adapter), value.count > limit {
            let identifier = PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: address)
            BlueZLog.warning(
                "updateValue: \(value.count) bytes for \(characteristic.uuid) not sent: central "
                    + "\(identifier.uuidString) takes at most \(limit) (its ATT MTU minus 3)")
            return .refused(.tooLong(central: identifier, limit: limit))
        }
        let indicatesOnly = Self.indicatesOnly(characteristic.properties)
        if sync({ $0.socketCharacteristics.contains(key) }), !sendsAsSignal(key, to: centrals) {
            let sent = updateThroughSockets(
                value, key, centrals: centrals, indicatesOnly: indicatesOnly, queue: client.queue)
            return sent ? .sent : .full
        }
        if indicatesOnly, sync({ $0.subscriptions.refusesUpdate(of: key) }) { return .full }
        // Once refused, refuse until the delegate heard isReady, so that values keep their order.
        if sync({ $0.roomTimer != nil }) { return .full }
        let backlog = client.backlog
        if backlog.queuedMessages >= PeripheralManager.backlogLimit.queuedMessages
            || backlog.outgoingBytes >= PeripheralManager.backlogLimit.outgoingBytes
        {
            waitForRoom(on: client)
            return .full
        }
        guard indicatesOnly else {
            application.notify(id, value: Array(value))
            return .sent
        }
        // Checked again with the wait begun in the same block: two callers cannot both send.
        let begun = sync { state in
            if state.subscriptions.refusesUpdate(of: key) { return false }
            if let generation = state.subscriptions.expectConfirmations(of: key) {
                startConfirmationTimer(generation, for: key, in: &state, queue: client.queue)
            }
            return true
        }
        guard begun else { return .full }
        application.notify(id, value: Array(value)) { [weak self] in self?.indicationConfirmed(key) }
        return .sent
    }

    /// Whether every subscriber of a characteristic with these properties gets indications:
    /// bluetoothd lets a central enable notifications only where the characteristic notifies.
    static func indicatesOnly(_ properties: CharacteristicProperties) -> Bool {
        !properties.isDisjoint(with: [.indicate, .indicateEncryptionRequired])
            && properties.isDisjoint(with: [.notify, .notifyEncryptionRequired])
    }

    /// The smallest `maximumUpdateValueLength` among the subscribers a value goes to (those
    /// listed, or all), counting only centrals whose MTU bluetoothd reported, with the address of
    /// the central it belongs to.
    ///
    /// Runs on every update, so a subscriber's identifier (two uppercased addresses joined and
    /// hashed: string work and allocations) is derived only when `centrals` lists whom to send
    /// to; the caller derives the one it reports when it refuses a value.
    private func tightestLimit(of key: ObjectIdentifier, for centrals: [Central]?, adapter: String)
        -> (address: String, limit: Int)?
    {
        let wanted = centrals.map { Set($0.map(\.identifier)) }
        return sync { state in
            var tightest: (address: String, limit: Int)?
            for address in state.subscriptions.subscribers(of: key) {
                guard let mtu = state.subscriptions.mtu(of: address), mtu - 3 < tightest?.limit ?? .max else {
                    continue
                }
                if let wanted,
                    !wanted.contains(PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: address))
                {
                    continue
                }
                tightest = (address, mtu - 3)
            }
            return tightest
        }
    }

    /// Polls the backlog every 5 ms while an update was refused, then tells the delegate once.
    private func waitForRoom(on client: BlueZClient) {
        let timer: (any DispatchSourceTimer)? = sync { state in
            guard state.roomTimer == nil else { return nil }
            let timer = DispatchSource.makeTimerSource(queue: client.queue)
            state.roomTimer = timer
            return timer
        }
        guard let timer else { return }
        timer.setEventHandler { [weak self, weak client] in
            guard let self, let client else { return timer.cancel() }
            let backlog = client.backlog
            guard backlog.queuedMessages < PeripheralManager.backlogLimit.queuedMessages / 2,
                backlog.outgoingBytes < PeripheralManager.backlogLimit.outgoingBytes / 2 || !client.isBusOpen
            else { return }
            timer.cancel()
            self.manager?.post(.readyToUpdate(.backlog))
        }
        timer.schedule(deadline: .now() + .milliseconds(5), repeating: .milliseconds(5), leeway: .milliseconds(2))
        timer.resume()
    }

    // MARK: Indication confirmations

    /// Ends the wait of `generation` after `confirmationTimeout`, in case a confirmation got lost.
    func startConfirmationTimer(
        _ generation: Int, for key: ObjectIdentifier, in state: inout State, queue: DispatchQueue
    ) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            let ended = self.sync { state in
                state.subscriptions.confirmationsTimedOut(for: key, generation: generation)
                return state.takeEndedWaits()
            }
            self.finish(ended)
        }
        timer.schedule(deadline: .now() + state.confirmationTimeout.dispatchInterval)
        state.confirmationTimers[generation] = timer
        timer.resume()
    }

    /// bluetoothd called `Confirm()` on the characteristic: a central confirmed its indication.
    private func indicationConfirmed(_ key: ObjectIdentifier) {
        let (counted, ended) = sync { state in
            (state.subscriptions.confirmationArrived(for: key), state.takeEndedWaits())
        }
        if !counted { BlueZLog.debug("a confirmation arrived while none was awaited: ignored") }
        finish(ended)
    }

    /// Cancels the timers of waits that ended, and tells the delegate "ready" once for those
    /// that refused an update (the refusal lasts until it is told).
    func finish(_ ended: State.EndedWaits) {
        for timer in ended.timers { timer.cancel() }
        let ready = ended.ready
        guard !ready.isEmpty else { return }
        manager?.post(.readyToUpdate(.confirmations(ready)))
    }

    // MARK: Events (on the connection's queue)

    /// bluetoothd called `StartNotify` (`isOn`) or `StopNotify` on `characteristic`.
    func notifyingChanged(_ characteristic: MutableCharacteristic, isOn: Bool) {
        let key = ObjectIdentifier(characteristic)
        let (changes, adapter, ended) = sync { state in
            state.published[key] = characteristic
            if let links = state.notifyLinks[key], !links.isEmpty {
                // bluetoothd fell back to StartNotify for one central: the others keep their sockets.
                if isOn { return ([state.subscriptions.subscribe(key)], state.adapterAddress, state.takeEndedWaits()) }
                let others = state.subscriptions.subscribers(of: key).filter { links[$0] == nil }
                for address in others {
                    _ = state.subscriptions.unsubscribe(key, address: address)
                    state.bonded.unsubscribed(address: address, characteristic: key)
                }
                return (others, state.adapterAddress, state.takeEndedWaits())
            }
            let changes = isOn ? [state.subscriptions.subscribe(key)] : state.subscriptions.unsubscribeAll(key)
            if !isOn { for address in changes { state.bonded.unsubscribed(address: address, characteristic: key) } }
            return (changes, state.adapterAddress, state.takeEndedWaits())
        }
        finish(ended)
        report(isOn ? .subscribed : .unsubscribed, addresses: changes, of: characteristic, adapter: adapter)
    }

    /// A device of our adapter changed: follow the links of centrals. A bonded central's
    /// subscriptions are kept for when its link is back (see `BondedSubscriptions`).
    func centralLinkChanged(address: String, connected: Bool, bonded: Bool) {
        if connected { return centralLinkCameBack(address: address) }
        let (left, adapter, ended): ([MutableCharacteristic], String, State.EndedWaits) = sync {
            state in
            let keys = state.subscriptions.disconnected(address)
            state.linkDropped(address, leaving: keys, bonded: bonded)
            return (keys.compactMap { state.published[$0] }, state.adapterAddress, state.takeEndedWaits())
        }
        finish(ended)
        closeNotifyLinks(of: address)
        for characteristic in left { report(.unsubscribed, addresses: [address], of: characteristic, adapter: adapter) }
    }

    /// The centrals already connected when the adapter appeared (a link that outlived the
    /// process before, or one bluetoothd had before it restarted): their `StartNotify` is
    /// theirs. Known links keep their order (on the connection's queue).
    func adoptConnectedCentrals(_ client: BlueZClient) {
        let addresses = client.devices.compactMap { _, device in device.connected ? device.address : nil }
        guard !addresses.isEmpty else { return }
        sync { state in
            for address in addresses where !state.subscriptions.connectedAddresses.contains(address) {
                state.subscriptions.connected(address)
            }
        }
    }

    /// A read or write came from `address`.
    func centralWasActive(address: String, mtu: Int?) {
        sync { $0.subscriptions.active(address, mtu: mtu) }
    }

    /// bluetoothd left or the adapter went away: every subscription ends.
    func dropAllSubscriptions() {
        closeAllNotifyLinks()
        let (ended, adapter, waits): ([(MutableCharacteristic, [String])], String, State.EndedWaits) =
            sync { state in
                let table = state.subscriptions.reset()
                state.bonded.reset()
                return (
                    table.compactMap { key, addresses in state.published[key].map { ($0, addresses) } },
                    state.adapterAddress, state.takeEndedWaits()
                )
            }
        finish(waits)
        for (characteristic, addresses) in ended {
            report(.unsubscribed, addresses: addresses, of: characteristic, adapter: adapter)
        }
    }

    /// The `Central` object for an address, with the MTU its requests reported (23 when none did).
    func central(address: String, adapter: String) -> Central {
        let mtu = sync { $0.subscriptions.mtu(of: address) } ?? 23
        return Central(
            identifier: PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: address),
            maximumUpdateValueLength: mtu - 3)
    }

    enum SubscriptionChange { case subscribed, unsubscribed }

    func report(
        _ change: SubscriptionChange, addresses: [String], of characteristic: MutableCharacteristic, adapter: String
    ) {
        guard !addresses.isEmpty else { return }
        let centrals = addresses.map { central(address: $0, adapter: adapter) }
        let current = sync { $0.subscriptions.subscribers(of: ObjectIdentifier(characteristic)) }
            .map { central(address: $0, adapter: adapter) }
        characteristic.setSubscribedCentrals(current)
        guard let manager else { return }
        manager.saveStateSoon()
        manager.post(.subscription(change, centrals, characteristic))
    }
}

extension PeripheralEngine.State {
    /// Waits for indication confirmations that ended: their timers, and those that refused an update.
    struct EndedWaits {
        var timers: [any DispatchSourceTimer] = []
        var ready: [CentralSubscriptions.EndedWait] = []
    }

    /// Takes the waits that ended from the subscription table, with their timers.
    mutating func takeEndedWaits() -> EndedWaits {
        let ended = subscriptions.takeEndedWaits()
        return EndedWaits(
            timers: ended.compactMap { confirmationTimers.removeValue(forKey: $0.generation) },
            ready: ended.filter(\.refused))
    }
}
