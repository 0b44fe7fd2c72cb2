internal import DBus

/// bluetoothd's queue of default agents (`src/agent.c`, 5.51 to 5.87 at least): every agent
/// that registers joins it, the first one on an empty queue at its head (the default), later ones
/// at its tail; `RequestDefaultAgent` moves an agent to the head; an agent that leaves is taken
/// out, and if it was the head the next one becomes the default without asking. Each change of
/// the head is logged the way bluetoothd's debug log says it (``defaultAgentLog``).
extension SimulatorCore {
    /// `agent_create`: a new agent is the default on an empty queue, else waits at the tail.
    func agentJoinsDefaultQueue(_ owner: String) {
        if defaultAgents.isEmpty {
            makeDefaultAgent(owner)
        } else {
            defaultAgents.append(owner)
        }
    }

    /// `add_default_agent`: `owner`'s agent moves to the head of the queue.
    func makeDefaultAgent(_ owner: String) {
        guard defaultAgents.first != owner else { return }
        defaultAgents.removeAll { $0 == owner }
        defaultAgents.insert(owner, at: 0)
        logDefaultAgent(owner)
    }

    /// `remove_default_agent`: `owner`'s agent leaves the queue; the next one becomes the default.
    func agentLeavesDefaultQueue(_ owner: String) {
        guard defaultAgents.first == owner else {
            defaultAgents.removeAll { $0 == owner }
            return
        }
        defaultAgents.removeFirst()
        if let next = defaultAgents.first {
            logDefaultAgent(next)
        } else {
            defaultAgentLog.append("Default agent cleared")
        }
    }

    private func logDefaultAgent(_ owner: String) {
        defaultAgentLog.append("Default agent set to \(owner) \(agents[owner]?.rawValue ?? "")")
    }
}
