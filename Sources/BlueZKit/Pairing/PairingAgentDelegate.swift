public import Foundation

/// Linux: decides pairings for a manager's pairing agent — passkeys to show, numeric
/// comparisons to confirm, passkeys to type, authorizations. Core Bluetooth has no
/// counterpart: on Apple's platforms the system asks the user.
///
/// Set one as ``CentralManager/pairingAgentDelegate`` or
/// ``PeripheralManager/pairingAgentDelegate``. The manager's agent (`org.bluez.Agent1`)
/// then registers with bluetoothd with the delegate's ``ioCapability``, which decides, by
/// the LE pairing IO-capability matrix and the remote device's own capability, which of
/// these methods a pairing needs. Without a delegate the agent registers as
/// `NoInputNoOutput` and accepts just-works pairing by itself (nothing else).
///
/// Every method is called on the manager's `queue`. Methods that decide something take a
/// `completion` to call once, from any thread, whenever the answer is known (after asking
/// the user, say): bluetoothd's request stays open until then. When bluetoothd gives up on
/// a request (the pairing failed or timed out on the other side) it cancels it:
/// ``pairingAgentDidCancelRequest(_:)`` is called and a later `completion` does nothing.
/// All methods have defaults, and every default that decides refuses: the capability the
/// delegate registers promises a person, so a question the app does not answer fails the
/// pairing (or the service authorization) rather than being accepted for it.
public protocol PairingAgentDelegate: AnyObject {
    /// The capability the agent registers with (`RegisterAgent`'s second argument); read when
    /// the delegate is set. Default: ``IOCapability/displayYesNo``.
    var ioCapability: IOCapability { get }

    /// Show `passkey` (six digits, zero-padded) so the user can type it on the remote device
    /// (`Agent1.DisplayPasskey`). `entered` counts the digits typed there so far, where the
    /// remote device reports them. bluetoothd waits for nothing.
    func pairingAgent(_ agent: PairingAgent, displayPasskey passkey: UInt32, entered: Int, for peer: PairingPeer)

    /// Numeric comparison: does the remote device show `passkey` too? (`Agent1.RequestConfirmation`).
    /// `completion(true)` pairs; `false` fails the pairing. Default: `false`.
    func pairingAgent(
        _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
        completion: @escaping @Sendable (Bool) -> Void)

    /// Passkey entry: the passkey the remote device shows (`Agent1.RequestPasskey`);
    /// `completion(nil)` refuses. Default: `nil`.
    func pairingAgent(
        _ agent: PairingAgent, requestPasskeyFor peer: PairingPeer, completion: @escaping @Sendable (UInt32?) -> Void)

    /// Just-works pairing that the remote device's security requirement started
    /// (`Agent1.RequestAuthorization`): a characteristic needs encryption, or a central pairs
    /// with us. `completion(false)` fails the pairing. Default: `false`.
    func pairingAgent(
        _ agent: PairingAgent, authorizePairingWith peer: PairingPeer, completion: @escaping @Sendable (Bool) -> Void)

    /// Whether `peer` may use the profile `service` (`Agent1.AuthorizeService`; BR/EDR
    /// profiles mostly). Default: `false`.
    func pairingAgent(_ agent: PairingAgent, authorizeService service: BluetoothUUID, for peer: PairingPeer) -> Bool

    /// bluetoothd cancelled the open request (`Agent1.Cancel`): dismiss what shows it.
    func pairingAgentDidCancelRequest(_ agent: PairingAgent)
}

extension PairingAgentDelegate {
    /// ``IOCapability/displayYesNo``: a screen and a yes/no answer.
    public var ioCapability: IOCapability { .displayYesNo }
    /// Shows nothing.
    public func pairingAgent(_ agent: PairingAgent, displayPasskey passkey: UInt32, entered: Int, for peer: PairingPeer)
    {}
    /// Refuses: a numeric comparison needs someone to compare.
    public func pairingAgent(
        _ agent: PairingAgent, confirmPasskey passkey: UInt32, for peer: PairingPeer,
        completion: @escaping @Sendable (Bool) -> Void
    ) { completion(false) }
    /// Refuses: there is no passkey to give.
    public func pairingAgent(
        _ agent: PairingAgent, requestPasskeyFor peer: PairingPeer, completion: @escaping @Sendable (UInt32?) -> Void
    ) { completion(nil) }
    /// Refuses: the app did not say yes.
    public func pairingAgent(
        _ agent: PairingAgent, authorizePairingWith peer: PairingPeer, completion: @escaping @Sendable (Bool) -> Void
    ) { completion(false) }
    /// Refuses: the app did not say yes.
    public func pairingAgent(_ agent: PairingAgent, authorizeService service: BluetoothUUID, for peer: PairingPeer)
        -> Bool
    { false }
    /// Does nothing.
    public func pairingAgentDidCancelRequest(_ agent: PairingAgent) {}
}

/// Linux: what a pairing agent can show and read (BlueZ's agent capabilities); with the remote
/// device's capability it decides how an LE pairing is authenticated.
public enum IOCapability: String, Sendable, Hashable, CaseIterable {
    /// A screen only: passkeys are shown (`DisplayOnly`).
    case displayOnly
    /// A screen and a yes/no answer: numeric comparison, or passkeys shown (`DisplayYesNo`).
    case displayYesNo
    /// A keyboard only: passkeys are typed (`KeyboardOnly`).
    case keyboardOnly
    /// Neither: just works (`NoInputNoOutput`).
    case noInputNoOutput
    /// Both: numeric comparison, or passkeys shown or typed (`KeyboardDisplay`).
    case keyboardDisplay

    /// The name `AgentManager1.RegisterAgent` takes.
    var bluezName: String {
        switch self {
        case .displayOnly: "DisplayOnly"
        case .displayYesNo: "DisplayYesNo"
        case .keyboardOnly: "KeyboardOnly"
        case .noInputNoOutput: "NoInputNoOutput"
        case .keyboardDisplay: "KeyboardDisplay"
        }
    }
}

/// Linux: the remote device a pairing request is about.
public struct PairingPeer: Sendable, Hashable, CustomStringConvertible {
    /// The stable identifier a ``Peripheral`` or ``Central`` with this address has on this adapter.
    public let identifier: UUID
    /// The device's Bluetooth address, `AA:BB:CC:DD:EE:FF`.
    public let address: String
    /// The peripheral, when a central manager's agent is asked about one it knows.
    public let peripheral: Peripheral?

    /// Compares identifiers.
    public static func == (a: PairingPeer, b: PairingPeer) -> Bool { a.identifier == b.identifier }
    /// Hashes the identifier.
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    /// The address and identifier.
    public var description: String { "PairingPeer(\(address), \(identifier.uuidString))" }
}
