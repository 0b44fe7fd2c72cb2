import BlueZ

extension BlueZAgent {
    /// Registers the agent from a task of its own as bluetoothd's default agent (a manager has
    /// an agent only when the app asked for that: ``CentralManagerOptions/requestsDefaultPairingAgent``);
    /// a refused `RequestDefaultAgent` unregisters it again, and a failure (bluetoothd gone
    /// again) only leaves a debug line: pairing is then up to other agents.
    func registerAsDefaultInBackground(for manager: String) {
        Task {
            do throws(BlueZError) {
                try await register(requestDefault: true)
            } catch {
                BlueZLog.debug("\(manager): no pairing agent: \(error)")
            }
        }
    }
}

extension CentralEngine {
    /// The peer a pairing request names: the known ``Peripheral``, if any (on the queue).
    func pairingPeer(_ id: DeviceID) -> PairingPeer? {
        guard let address = id.address else { return nil }
        let peripheral = peripherals[id]
        return PairingPeer(
            identifier: peripheral?.identifier
                ?? PeripheralIdentity.identifier(adapterAddress: adapterAddress, deviceAddress: address),
            address: address, peripheral: peripheral)
    }
}

extension PeripheralManager {
    /// The peer a pairing request names: a central, known by its identifier and address.
    func pairingPeer(_ device: DeviceID) -> PairingPeer? {
        guard let address = device.address else { return nil }
        let adapter = engine.sync { $0.adapterAddress }
        return PairingPeer(
            identifier: PeripheralIdentity.identifier(adapterAddress: adapter, deviceAddress: address),
            address: address, peripheral: nil)
    }
}

extension CentralManager {
    /// Linux: decides pairings — passkeys, numeric comparisons, authorizations — for this
    /// manager's agent; held weakly (once released, the agent refuses what it would have
    /// decided), nil for built-in just works. The same as `pairingAgent.delegate`; see
    /// ``PairingAgent/delegate``. Core Bluetooth has none.
    public var pairingAgentDelegate: (any PairingAgentDelegate)? {
        get { pairingAgent.delegate }
        set { pairingAgent.delegate = newValue }
    }
}

extension PeripheralManager {
    /// Linux: decides pairings — passkeys, numeric comparisons, authorizations — for this
    /// manager's agent; held weakly (once released, the agent refuses what it would have
    /// decided), nil for built-in just works. The same as `pairingAgent.delegate`; see
    /// ``PairingAgent/delegate``. Core Bluetooth has none.
    public var pairingAgentDelegate: (any PairingAgentDelegate)? {
        get { pairingAgent.delegate }
        set { pairingAgent.delegate = newValue }
    }
}
