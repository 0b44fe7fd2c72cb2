import BlueZ
public import Dispatch
import Foundation
import Locking

/// Linux: a manager's pairing agent (`org.bluez.Agent1`), which bluetoothd asks when a pairing
/// needs a decision. Core Bluetooth has no counterpart.
///
/// Every ``CentralManager`` and ``PeripheralManager`` has one (``CentralManager/pairingAgent``),
/// but it is registered with bluetoothd only when the manager was created with
/// ``CentralManagerOptions/requestsDefaultPairingAgent``, and then as bluetoothd's default
/// agent, again whenever bluetoothd appears. The default agent answers the pairings of every
/// program on the machine. Without that option nothing is registered and a delegate is never
/// asked: bluetoothd (5.51 and later) would make any registered agent the default, at once when
/// it is the first, or later when the agents registered before it leave. ``Peripheral/pair()``
/// sends `Device1.Pair` on the manager's connection, so bluetoothd asks this agent about it
/// when it is registered (and the default agent otherwise).
///
/// Without a ``delegate`` it registers as `NoInputNoOutput` and answers only what just works
/// needs: it accepts the just-works confirmation (`RequestAuthorization`) and refuses numeric
/// comparisons, passkeys and service authorizations. With one it registers again with the
/// delegate's ``PairingAgentDelegate/ioCapability`` and passes each request to it on the
/// manager's `queue`. The delegate is held weakly: when it is released, the capability it
/// registered still promises a person, so every request is refused and the agent registers
/// again as `NoInputNoOutput`.
///
/// `Sendable` as the compiler checks it: its mutable state is behind a `PosixMutex`, the
/// delegate in a `WeakDelegate` (Locking).
public final class PairingAgent: Sendable {
    /// The queue the delegate is called on: the manager's.
    public let queue: DispatchQueue
    // The delegate, held weakly and typed behind its own lock.
    private let delegateReference = WeakDelegate(DelegateReference())

    /// The delegate, held weakly.
    private struct DelegateReference {
        weak var object: (any PairingAgentDelegate)?
    }
    private let shared = PosixMutex(Shared())

    private struct Shared {
        var capability = IOCapability.noInputNoOutput
        var agent: BlueZAgent?
        /// The peer a device object path names, on the agent connection's queue.
        var lookup: (@Sendable (DeviceID) -> PairingPeer?)?
    }

    init(queue: DispatchQueue) { self.queue = queue }

    /// The object that decides pairings, held weakly; nil for built-in just works.
    ///
    /// Setting it re-registers the agent with the delegate's ``PairingAgentDelegate/ioCapability``
    /// (`AgentManager1.UnregisterAgent`, `RegisterAgent`, and `RequestDefaultAgent` when the
    /// manager asked for it) when bluetoothd holds another one; changes are registered in the
    /// order they were made, failures are logged. Set it before pairing starts: bluetoothd keeps
    /// the capability it had when the pairing began. Until bluetoothd holds the new capability,
    /// requests that the old one brought are refused unless the delegate answers them.
    public var delegate: (any PairingAgentDelegate)? {
        get { delegateReference.value.object }
        set {
            let capability = newValue?.ioCapability ?? .noInputNoOutput
            // Under the lock: the wanted capability reaches the agent in the order of the changes.
            let agent = shared.withLock { shared in
                delegateReference.value = DelegateReference(object: newValue)
                shared.capability = capability
                return shared.agent
            }
            agent?.setCapability(capability.bluezName)
        }
    }

    /// The capability the agent registers with: the delegate's, or ``IOCapability/noInputNoOutput``.
    public var ioCapability: IOCapability { shared.withLock { $0.capability } }

    /// Whether bluetoothd holds the agent's registration now, with ``ioCapability`` (false
    /// while a change of capability is being registered, or when the manager registers none).
    public var isRegistered: Bool {
        shared.withLock { $0.agent?.registeredCapability == $0.capability.bluezName }
    }

    /// The capability handed to the BlueZ agent to register (nil without one): the current
    /// delegate's as soon as it is set, which is what keeps changes in order.
    var handedCapability: String? { shared.withLock { $0.agent }?.wantedCapability }

    /// Routes `agent`'s requests here; `lookup` names the device of a request (on the agent
    /// connection's queue). Called once, before the agent registers.
    func attach(_ agent: BlueZAgent, lookup: @escaping @Sendable (DeviceID) -> PairingPeer?) async {
        let capability = shared.withLock { shared in
            shared.agent = agent
            shared.lookup = lookup
            return shared.capability
        }
        agent.setResponder { [weak self] device, request, answer in
            guard let self else { return answer(.reject) }
            self.handle(device, request, answer)
        }
        agent.setCapability(capability.bluezName)
    }

    /// On the agent connection's queue: finds the peer, then asks the delegate on `queue`.
    private func handle(
        _ device: DeviceID?, _ request: BlueZAgent.Request?,
        _ answer: @escaping @Sendable (BlueZAgent.Answer) -> Void
    ) {
        guard let device, let request else {
            return queue.async { self.delegate?.pairingAgentDidCancelRequest(self) }
        }
        guard let peer = shared.withLock({ $0.lookup })?(device) else { return answer(.reject) }
        queue.async {
            guard let delegate = self.delegate else { return answer(self.answerWithoutDelegate(request)) }
            self.ask(delegate, request, peer, answer)
        }
    }

    /// The answer when no delegate decides: just works while bluetoothd holds `NoInputNoOutput`
    /// and it is wanted; a refusal otherwise — the registered capability promised a person (a
    /// delegate was released, or is being replaced), and then `NoInputNoOutput` is registered again.
    private func answerWithoutDelegate(_ request: BlueZAgent.Request) -> BlueZAgent.Answer {
        let (agent, released): (BlueZAgent?, Bool) = shared.withLock { shared in
            let released = shared.capability != .noInputNoOutput && delegateReference.value.object == nil
            if released { shared.capability = .noInputNoOutput }
            return (shared.agent, released)
        }
        if released {
            BlueZLog.debug("pairing agent: the delegate is gone; registering as NoInputNoOutput again")
            agent?.setCapability(IOCapability.noInputNoOutput.bluezName)
            return .reject
        }
        guard agent?.registeredCapability == IOCapability.noInputNoOutput.bluezName else { return .reject }
        return Self.builtIn(request)
    }

    private func ask(
        _ delegate: any PairingAgentDelegate, _ request: BlueZAgent.Request, _ peer: PairingPeer,
        _ answer: @escaping @Sendable (BlueZAgent.Answer) -> Void
    ) {
        switch request {
        case .displayPasskey(let passkey, let entered):
            delegate.pairingAgent(self, displayPasskey: passkey, entered: Int(entered), for: peer)
            answer(.accept)
        case .confirmPasskey(let passkey):
            delegate.pairingAgent(self, confirmPasskey: passkey, for: peer) { answer($0 ? .accept : .reject) }
        case .requestPasskey:
            delegate.pairingAgent(self, requestPasskeyFor: peer) { passkey in
                answer(passkey.map { .passkey($0) } ?? .reject)
            }
        case .authorizePairing:
            delegate.pairingAgent(self, authorizePairingWith: peer) { answer($0 ? .accept : .reject) }
        case .authorizeService(let uuid):
            guard let service = BluetoothUUID(parsing: uuid) else { return answer(.reject) }
            answer(delegate.pairingAgent(self, authorizeService: service, for: peer) ? .accept : .reject)
        }
    }

    /// The answers of an agent without a delegate: only what just works needs. bluetoothd asks
    /// a `NoInputNoOutput` agent `RequestAuthorization` for a just-works pairing that no `Pair`
    /// call started (5.66 `device_confirm_passkey` with the kernel's confirm hint); it never
    /// needs a comparison, a passkey or a service authorization from it.
    private static func builtIn(_ request: BlueZAgent.Request) -> BlueZAgent.Answer {
        switch request {
        case .displayPasskey, .authorizePairing: .accept
        case .confirmPasskey, .requestPasskey, .authorizeService: .reject
        }
    }
}
