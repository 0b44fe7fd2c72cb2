internal import DBus

/// How pairing is authenticated, and the agent that bluetoothd asks.
///
/// The simulated kernel follows the LE Secure Connections IO-capability matrix (Core
/// Specification Vol 3 Part H, table 2.8) between the agent's registered capability (our side,
/// the initiator) and the peripheral's ``SimulatedPeripheral/ioCapability``, and bluetoothd 5.66's
/// `src/device.c` for which `Agent1` method that needs:
///
/// | method | kernel event | bluetoothd | agent call |
/// | --- | --- | --- | --- |
/// | just works | user confirm, hint 1 | `device_confirm_passkey` | none for a `Pair` call, else `RequestAuthorization(device)` |
/// | numeric comparison | user confirm, hint 0 | `device_confirm_passkey` | `RequestConfirmation(device, passkey)` |
/// | passkey entry, we type | user passkey request | `device_request_passkey` | `RequestPasskey(device)` → must equal the peripheral's passkey |
/// | passkey entry, we show | passkey notify | `device_notify_passkey` | `DisplayPasskey(device, passkey, 0)`, no reply awaited; the peripheral's user types it |
///
/// The agent is the `Pair` caller's (else the default one) for a `Pair` call, and the default
/// agent (`agent_get(NULL)`) for pairing a security requirement started; without one, pairing fails.
extension SimulatorCore {
    /// The association model one pairing uses.
    enum PairingMethod: Equatable {
        case justWorks
        case numericComparison
        /// Passkey entry with the passkey typed on our side (`RequestPasskey`).
        case enterPasskey
        /// Passkey entry with the passkey shown on our side (`DisplayPasskey`).
        case displayPasskey
    }

    /// The LE Secure Connections matrix: `agent` is our capability as registered (`""` is
    /// `KeyboardDisplay`, as in bluetoothd's `parse_io_capability`), `peripheral` the other side's.
    static func pairingMethod(agent: String, peripheral: SimulatedPeripheral.IOCapability) -> PairingMethod {
        let ours =
            SimulatedPeripheral.IOCapability(rawValue: agent.isEmpty ? "KeyboardDisplay" : agent) ?? .noInputNoOutput
        switch (ours, peripheral) {
        case (.noInputNoOutput, _), (_, .noInputNoOutput): return .justWorks
        case (.displayOnly, .displayOnly), (.displayOnly, .displayYesNo), (.displayYesNo, .displayOnly):
            return .justWorks
        case (.displayYesNo, .displayYesNo), (.displayYesNo, .keyboardDisplay), (.keyboardDisplay, .displayYesNo),
            (.keyboardDisplay, .keyboardDisplay):
            return .numericComparison
        case (.keyboardOnly, _), (.keyboardDisplay, .displayOnly):
            // We have the keyboard; the peripheral shows the passkey (both type it when it has only a keyboard too).
            return .enterPasskey
        case (.displayOnly, .keyboardOnly), (.displayOnly, .keyboardDisplay), (.displayYesNo, .keyboardOnly),
            (.keyboardDisplay, .keyboardOnly):
            return .displayPasskey
        }
    }

    /// Security-triggered pairing (no `Pair` call): a GATT operation needs encryption. Asks the
    /// default agent (`agent_get(NULL)`: only an agent that called `RequestDefaultAgent`); no
    /// default agent fails. `completion` runs on the queue with the outcome; success pairs.
    func pairForSecurity(_ device: ObjectPath, completion: @escaping @Sendable (Bool) -> Void) {
        guard let owner = defaultAgents.first else { return completion(false) }
        authenticate(device, agentOwner: owner, forPairCall: false) { accepted in
            guard self.devices[device]?.connected == true else { return completion(false) }
            if accepted { self.markPaired(device) }
            completion(accepted)
        }
    }

    /// Runs the agent side of one pairing with `agentOwner`'s agent; `completion` runs on the
    /// queue (unless bluetoothd restarted meanwhile) with whether the pairing is authenticated.
    func authenticate(
        _ device: ObjectPath, agentOwner owner: String, forPairCall: Bool,
        completion: @escaping @Sendable (Bool) -> Void
    ) {
        guard let agentPath = agents[owner], let connection, let destination = try? BusName(owner),
            let state = devices[device], let peripheral = peripheral(of: state)
        else { return completion(false) }
        let method = Self.pairingMethod(agent: agentCapabilities[owner] ?? "", peripheral: peripheral.ioCapability)
        let passkey = peripheral.passkey
        let member: MemberName
        var arguments: [DBusValue] = [.objectPath(device)]
        switch method {
        case .justWorks:
            // device_confirm_passkey: a bonding request (Pair) is auto-accepted without asking.
            if forPairCall { return completion(true) }
            member = "RequestAuthorization"
        case .numericComparison:
            member = "RequestConfirmation"
            arguments.append(.uint32(passkey))
        case .enterPasskey:
            member = "RequestPasskey"
        case .displayPasskey:
            // device_notify_passkey: shown, no reply awaited; the peripheral's user types it in.
            arguments += [.uint32(passkey), .uint16(0)]
            Task {
                _ = try? await connection.call(
                    destination: destination, path: agentPath, interface: "org.bluez.Agent1",
                    member: "DisplayPasskey", arguments: arguments)
            }
            return completion(true)
        }
        let epoch = self.epoch
        openAgentRequests[device] = (destination, agentPath)
        Task {
            var accepted = true
            do {
                let reply = try await connection.call(
                    destination: destination, path: agentPath, interface: "org.bluez.Agent1", member: member,
                    arguments: arguments)
                if method == .enterPasskey { accepted = reply.first?.uint32Value == passkey }
            } catch {
                accepted = false
            }
            self.perform(ifEpoch: epoch) { [accepted] in
                // Answered: no longer open (bluetoothd clears `agent->request` before its callback).
                if self.openAgentRequests[device]?.agent == agentPath { self.openAgentRequests[device] = nil }
                completion(accepted)
            }
        }
    }

    /// bluetoothd gave up a pairing whose agent request is still open: `Agent1.Cancel` to that
    /// agent (`bonding_request_cancel` → `agent_cancel`), which answers it no more.
    func cancelOpenAgentRequest(_ device: ObjectPath) {
        guard let (owner, agent) = openAgentRequests.removeValue(forKey: device), let connection else { return }
        Task {
            _ = try? await connection.call(
                destination: owner, path: agent, interface: "org.bluez.Agent1", member: "Cancel", arguments: [])
        }
    }
}
