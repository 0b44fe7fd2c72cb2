internal import DBus

/// The pairing agents registered with the simulated bluetoothd, and questions put to them the
/// way bluetoothd puts them (for tests of agents, beside the pairing the simulated kernel runs).
extension SimulatedBlueZ {
    /// One agent as bluetoothd holds it.
    package struct AgentRegistration: Sendable, Hashable {
        /// The capability it registered with (`RegisterAgent`'s second argument).
        package var capability: String
        /// Whether it is bluetoothd's default agent: the head of the queue every registered agent
        /// joins (the first one registered, or the last one that called `RequestDefaultAgent`).
        package var isDefault: Bool

        /// A registration as bluetoothd would hold it.
        package init(capability: String, isDefault: Bool) {
            self.capability = capability
            self.isDefault = isDefault
        }
    }

    /// A question bluetoothd asks an agent about a device (`doc/org.bluez.Agent.rst`).
    package enum AgentQuestion: Sendable, Hashable {
        /// `RequestConfirmation(device, passkey)`: numeric comparison.
        case confirmation(UInt32)
        /// `RequestAuthorization(device)`: just works that no `Pair` call started.
        case authorization
        /// `AuthorizeService(device, uuid)`.
        case service(String)
        /// `RequestPasskey(device)`.
        case passkey
    }

    /// The agents registered now, ordered by their owners' unique names.
    package var agentRegistrations: [AgentRegistration] {
        core.run {
            core.agents.keys.sorted().map {
                AgentRegistration(
                    capability: core.agentCapabilities[$0] ?? "", isDefault: core.defaultAgents.first == $0)
            }
        }
    }

    /// What bluetoothd's debug log says of the default agent, oldest first, as bluetoothd words
    /// it: "Default agent set to OWNER PATH" and "Default agent cleared" (`src/agent.c`).
    package var defaultAgentLog: [String] { core.run { core.defaultAgentLog } }

    /// Asks every registered agent `question` about the device `address` of the first adapter,
    /// as bluetoothd does; returns, in the order of ``agentRegistrations``, whether each one
    /// accepted (a successful reply; for ``AgentQuestion/passkey``, any passkey).
    package func ask(_ question: AgentQuestion, aboutDevice address: String) async -> [Bool] {
        let (connection, targets, adapter) = core.run {
            (
                core.connection, core.agents.sorted { $0.key < $1.key },
                core.adapters.keys.sorted { ($0.count, $0) < ($1.count, $1) }.first ?? "hci0"
            )
        }
        guard let connection else { return [] }
        let device = DBusValue.objectPath(SimulatorCore.devicePath(adapter: adapter, address: address))
        let (member, arguments): (MemberName, [DBusValue]) =
            switch question {
            case .confirmation(let passkey): ("RequestConfirmation", [device, .uint32(passkey)])
            case .authorization: ("RequestAuthorization", [device])
            case .service(let uuid): ("AuthorizeService", [device, .string(uuid)])
            case .passkey: ("RequestPasskey", [device])
            }
        var answers: [Bool] = []
        for (owner, path) in targets {
            do {
                _ = try await connection.call(
                    destination: try BusName(owner), path: path, interface: "org.bluez.Agent1", member: member,
                    arguments: arguments)
                answers.append(true)
            } catch {
                answers.append(false)
            }
        }
        return answers
    }
}
