import BlueZ
import Foundation

/// Per-central subscriptions and values through the notify socket bluetoothd opens for each
/// subscribing central (bluetoothd 5.79 and later; see `BlueZServerFeatures`), on the bus queue.
extension PeripheralEngine {
    /// Whether `characteristic` offers `AcquireNotify` on a bluetoothd with `features`: where
    /// bluetoothd has per-device sockets, every characteristic that notifies or indicates does.
    static func offersNotifySockets(_ characteristic: MutableCharacteristic, _ features: BlueZServerFeatures) -> Bool {
        features.perDeviceNotifySockets
            && !characteristic.properties.isDisjoint(with: [
                .notify, .indicate, .notifyEncryptionRequired, .indicateEncryptionRequired,
            ])
    }

    /// The running bluetoothd's features, probed from the adapter's properties.
    func serverFeatures(_ client: BlueZClient) -> BlueZServerFeatures {
        run { client.serverFeatures }
    }

    /// What `characteristic` does with the sockets bluetoothd opens for it.
    func notifySockets(for characteristic: MutableCharacteristic) -> BlueZGattApplication.NotifySockets {
        BlueZGattApplication.NotifySockets(
            opened: { [weak self] link in self?.notifyLinkOpened(link, characteristic) },
            confirmed: { [weak self] link in self?.notifyLinkConfirmed(link, characteristic) },
            closed: { [weak self] link in self?.notifyLinkClosed(link, characteristic) })
    }

    // MARK: Events (on the connection's queue)

    /// A central subscribed: bluetoothd called `AcquireNotify` with its device and MTU.
    private func notifyLinkOpened(_ link: BlueZNotifyLink, _ characteristic: MutableCharacteristic) {
        let key = ObjectIdentifier(characteristic)
        let address = link.deviceAddress
        let (isNew, replaced, adapter, ready) = sync { state in
            state.published[key] = characteristic
            state.subscriptions.active(address, mtu: link.mtu)
            let replaced = state.notifyLinks[key, default: [:]].updateValue(link, forKey: address)
            state.bonded.socketOpened(address: address, characteristic: key)
            let ready = replaced.map { state.stopWaitingForRoom(in: [$0]) } ?? false
            return (state.subscriptions.subscribe(key, address: address), replaced, state.adapterAddress, ready)
        }
        replaced?.close()
        if ready { socketsHaveRoom() }
        if isNew { report(.subscribed, addresses: [address], of: characteristic, adapter: adapter) }
    }

    /// bluetoothd wrote a confirmation: the central confirmed an indication sent through its socket.
    private func notifyLinkConfirmed(_ link: BlueZNotifyLink, _ characteristic: MutableCharacteristic) {
        let key = ObjectIdentifier(characteristic)
        let ended = sync { state in
            state.socketConfirmationsSeen = true
            _ = state.subscriptions.confirmationArrived(for: key, from: link.deviceAddress)
            return state.takeEndedWaits()
        }
        finish(ended)
    }

    /// bluetoothd closed a central's socket: it unsubscribed, or its link or bluetoothd ended.
    private func notifyLinkClosed(_ link: BlueZNotifyLink, _ characteristic: MutableCharacteristic) {
        let key = ObjectIdentifier(characteristic)
        let address = link.deviceAddress
        let (left, adapter, ended, ready) = sync { state in
            var left = false
            if state.notifyLinks[key]?[address] === link {
                state.notifyLinks[key]?[address] = nil
                left = state.subscriptions.unsubscribe(key, address: address)
                // The link may be dropping (`Connected` false can come just after): see `BondedSubscriptions`.
                if left, let entry = state.bondedEntry(key) {
                    state.bonded.socketClosed(address: address, entry: entry, at: .now)
                }
            }
            let ready = state.stopWaitingForRoom(in: [link])
            return (left, state.adapterAddress, state.takeEndedWaits(), ready)
        }
        finish(ended)
        if ready { socketsHaveRoom() }
        if left { report(.unsubscribed, addresses: [address], of: characteristic, adapter: adapter) }
    }

    /// Closes the sockets of a central whose link went down (bluetoothd closes its ends too).
    func closeNotifyLinks(of address: String) {
        let (links, ready) = sync { state in
            let links = state.notifyLinks.keys.compactMap { state.notifyLinks[$0]?.removeValue(forKey: address) }
            return (links, state.stopWaitingForRoom(in: links))
        }
        for link in links { link.close() }
        if ready { socketsHaveRoom() }
    }

    /// Closes every socket (bluetoothd or the adapter went away).
    func closeAllNotifyLinks() {
        let links = sync { state in
            defer {
                state.notifyLinks.removeAll()
                state.socketRoomWaits.removeAll()
            }
            return state.notifyLinks.values.flatMap(\.values)
        }
        for link in links { link.close() }
    }

    // MARK: Sending

    /// `updateValue` for a characteristic with sockets: writes `value` to the socket of each
    /// target central (those in `centrals` that are subscribed, or all subscribers). Returns false,
    /// sending nothing, when one of them is full (the delegate hears "ready" when they all have
    /// room) or, for a characteristic that only indicates, has not confirmed the last indication.
    func updateThroughSockets(
        _ value: Data, _ key: ObjectIdentifier, centrals: [Central]?, indicatesOnly: Bool,
        queue connectionQueue: DispatchQueue
    ) -> Bool {
        let wanted = centrals.map { Set($0.map(\.identifier)) }
        let (targets, waiting) = sync { state -> ([BlueZNotifyLink], Bool) in
            let links = (state.notifyLinks[key] ?? [:]).values.filter { link in
                guard let wanted else { return true }
                return wanted.contains(
                    PeripheralIdentity.identifier(
                        adapterAddress: state.adapterAddress, deviceAddress: link.deviceAddress))
            }
            // Once refused, refuse until the delegate heard isReady, so that values keep their order.
            return (links, !state.socketRoomWaits.isEmpty)
        }
        if waiting { return false }
        guard !targets.isEmpty else { return true }
        let full = targets.filter { !$0.hasRoom }
        guard full.isEmpty else {
            waitForRoom(in: full)
            return false
        }
        let addresses = targets.map(\.deviceAddress)
        let begun = sync { state in
            guard indicatesOnly else { return true }
            if state.subscriptions.refusesUpdate(of: key, to: addresses) { return false }
            guard state.socketConfirmationsSeen else { return true }
            if let generation = state.subscriptions.expectConfirmations(of: key, from: addresses) {
                startConfirmationTimer(generation, for: key, in: &state, queue: connectionQueue)
            }
            return true
        }
        guard begun else { return false }
        let bytes = Array(value)
        for link in targets where link.send(bytes) == .wouldBlock {
            BlueZLog.warning("updateValue: the socket of central \(link.deviceAddress) filled up: value dropped for it")
        }
        return true
    }

    /// Waits for each of `links` to have room, then tells the delegate once.
    private func waitForRoom(in links: [BlueZNotifyLink]) {
        let new = sync { state in
            links.filter { state.socketRoomWaits.insert(ObjectIdentifier($0)).inserted }
        }
        for link in new {
            link.whenWritable { [weak self, weak link] in
                guard let self, let link else { return }
                let ready = self.sync { $0.stopWaitingForRoom(in: [link]) }
                if ready { self.socketsHaveRoom() }
            }
        }
    }

    /// Every socket that refused an update has room again.
    private func socketsHaveRoom() {
        manager?.post(.readyToUpdate(.sockets))
    }
}

extension PeripheralEngine.State {
    /// Stops waiting for room in `links` (they have room, or are closed: a closed link's wait
    /// never ends by itself, as we closed it or its end was seen). Returns whether that ended
    /// the last wait, so the delegate is to hear that it may update again.
    mutating func stopWaitingForRoom(in links: [BlueZNotifyLink]) -> Bool {
        var removed = false
        for link in links where socketRoomWaits.remove(ObjectIdentifier(link)) != nil { removed = true }
        return removed && socketRoomWaits.isEmpty
    }
}
