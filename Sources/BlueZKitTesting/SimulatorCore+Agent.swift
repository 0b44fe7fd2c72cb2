internal import DBus

/// Pairing that bluetoothd starts by itself, and the agent it asks.
extension SimulatorCore {
    /// Just-works pairing that a GATT operation needs (no `Pair` call), as bluetoothd 5.66 does it:
    /// the kernel asks to confirm, `device_confirm_passkey` has no bonding request to auto-accept,
    /// so it calls `RequestAuthorization(device)` on the default agent (`agent_get(NULL)`: only an
    /// agent that called `RequestDefaultAgent`). A success reply pairs; an error, or no default
    /// agent, fails. `completion` runs on the queue with the outcome.
    func pairForSecurity(_ device: ObjectPath, completion: @escaping @Sendable (Bool) -> Void) {
        guard let owner = defaultAgents.first, let agentPath = agents[owner], let connection,
            let destination = try? BusName(owner)
        else { return completion(false) }
        let epoch = self.epoch
        Task {
            var accepted = true
            do {
                _ = try await connection.call(
                    destination: destination, path: agentPath, interface: "org.bluez.Agent1",
                    member: "RequestAuthorization", arguments: [.objectPath(device)])
            } catch {
                accepted = false
            }
            self.perform(ifEpoch: epoch) { [accepted] in
                guard self.devices[device]?.connected == true else { return completion(false) }
                if accepted { self.markPaired(device) }
                completion(accepted)
            }
        }
    }
}
