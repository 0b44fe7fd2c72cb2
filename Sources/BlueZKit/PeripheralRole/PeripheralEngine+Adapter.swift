import BlueZ
import Foundation

/// bluetoothd's events for the manager's client: the adapter, and the links and bonds of
/// centrals. The engine's work, on the bus queue.
extension PeripheralEngine {
    /// One event of the manager's `BlueZClient`.
    func handle(_ event: BlueZClient.Event) {
        switch event {
        case .adapterChanged(let status): adapterChanged(status)
        case .deviceChanged(_, let device, let changed):
            guard let address = device.address else { break }
            if changed.contains(.connected) {
                centralLinkChanged(
                    address: address, connected: device.connected, bonded: device.paired || device.bonded)
            } else if !changed.isDisjoint(with: [.paired, .bonded]), !device.paired, !device.bonded {
                centralBondRemoved(address: address)
            }
        case .deviceRemoved(let id):
            guard let address = id.address else { break }
            centralLinkChanged(address: address, connected: false, bonded: false)
            centralBondRemoved(address: address)
        case .deviceAdvertised, .gattObjectsChanged, .valueChanged, .batteryChanged: break
        }
    }

    /// The adapter (or bluetoothd) appeared, changed or went away.
    func adapterChanged(_ status: BlueZClient.AdapterStatus) {
        let (change, agent, republish): (AdapterPresence.Change, BlueZAgent?, Bool) = sync { state in
            let change = state.presence.update(status)
            // Registrations end with bluetoothd and with the adapter; they are made again once it
            // is powered.
            var republish = false
            if case .present(_, let powered) = status {
                republish = powered && state.registrationsLost
                if republish { state.registrationsLost = false }
            } else {
                state.registrationsLost = true
            }
            return (change, change.bluetoothdAppeared ? state.agent : nil, republish)
        }
        // bluetoothd forgets agents when it restarts: register on every appearance.
        agent?.registerAsDefaultInBackground(for: "PeripheralManager")
        let state = change.state
        if case .present = status {
            if let client = sync({ $0.client }) { adoptConnectedCentrals(client) }
        } else {
            dropAllSubscriptions()
        }
        if republish { changes.enqueue { await self.republish() } }
        manager?.post(.state(state))
    }
}
