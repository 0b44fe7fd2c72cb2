package import DBus
import Locking
import Synchronization

/// A pairing agent (`org.bluez.Agent1`): by itself "just works" with the `NoInputNoOutput`
/// capability, or the app's, through a ``Responder``.
///
/// bluetoothd asks the agent of the connection that called `Device1.Pair` for that pairing,
/// and the *default* agent (`RequestDefaultAgent`) whenever a pairing nobody's own agent
/// covers needs a decision: an incoming pairing request, a pairing that a security
/// requirement started, a service authorization (5.66 `src/device.c`, `new_auth`:
/// `agent_get(NULL)`). Becoming the default agent therefore decides for every program on
/// the machine. Beware: bluetoothd (5.51 to 5.87 at least, `src/agent.c`, `agent_create`) puts
/// *every* registered agent in its queue of default agents, the first one on an empty queue at
/// the head — so registering alone can make an agent the default, now or when the agents
/// before it leave. Register only an agent that is meant to be the default. Without a responder
/// this agent answers only what just works needs: `RequestAuthorization` (the just-works
/// confirmation of a pairing that no `Pair` call started) is accepted; numeric comparison
/// (`RequestConfirmation`), passkeys, PIN codes and service authorizations are rejected —
/// a `NoInputNoOutput` agent has no one to compare or type, and bluetoothd auto-accepts the
/// just-works confirmation of a `Pair` call by itself. With a responder, each request waits
/// for the responder's answer, or for bluetoothd's `Cancel`. Only bluetoothd may call it.
///
/// bluetoothd keeps one agent per D-Bus connection (`RegisterAgent` answers
/// `AlreadyExists` for a second one); registrations end when the connection
/// closes or bluetoothd restarts (register again then).
package final class BlueZAgent: Sendable {
    /// The capability this agent registers with unless told otherwise (``setCapability(_:)``).
    package static let capability = "NoInputNoOutput"
    /// The error a request this agent cannot serve, or its responder refuses, is answered with.
    package static let rejected = "org.bluez.Error.Rejected"
    /// The error a request bluetoothd cancelled is answered with, if still open.
    package static let canceled = "org.bluez.Error.Canceled"

    /// What bluetoothd asks an agent with a responder (`doc/agent-api.txt`); PIN codes
    /// (BR/EDR legacy pairing) are not forwarded.
    package enum Request: Sendable, Hashable {
        /// `DisplayPasskey(device, passkey, entered)`: show it; bluetoothd waits for no answer.
        case displayPasskey(UInt32, entered: UInt16)
        /// `RequestConfirmation(device, passkey)`: numeric comparison.
        case confirmPasskey(UInt32)
        /// `RequestPasskey(device)`: the passkey the remote device shows.
        case requestPasskey
        /// `RequestAuthorization(device)`: just-works pairing that no `Pair` call asked for.
        case authorizePairing
        /// `AuthorizeService(device, uuid)`: a remote device uses a profile.
        case authorizeService(String)
    }

    /// A responder's answer: accept (with the passkey for ``Request/requestPasskey``) or reject.
    package enum Answer: Sendable, Hashable {
        case accept
        case passkey(UInt32)
        case reject
    }

    /// Decides requests: called on the connection's queue with the device and
    /// a function to call once, from any thread, with the answer. `nil` as the device marks
    /// bluetoothd's `Cancel` of the open requests (their answer functions become no-ops).
    package typealias Responder =
        @Sendable (
            _ device: BlueZClient.DeviceID?, _ request: Request?, _ answer: @escaping @Sendable (Answer) -> Void
        ) -> Void

    private static let nextNumber = Atomic<Int>(0)
    /// The connection the agent is exported on and registered from.
    let connection: DBusConnection
    /// The agent's object path, unique per instance (`/org/bluezkit/agentN`).
    package let path: ObjectPath
    let state: PosixMutex<State>

    struct State {
        var exported = false
        var registered = false
        var isDefault = false
        /// The capability wanted, and the one bluetoothd holds for the current registration.
        var capability = BlueZAgent.capability
        var registeredCapability: String?
        var wantsDefault = true
        /// A registration or re-registration is under way (it picks up capability changes).
        var busy = false
        var responder: Responder?
        var open: [Int: DBusMethodInvocation] = [:]
        var nextRequest = 0
    }

    /// Creates an agent on `connection`; nothing is exported or registered until ``register(requestDefault:)``.
    package convenience init(bus: BlueZBus) { self.init(connection: bus.connection) }

    /// Creates an agent on `connection`; nothing is exported or registered until ``register(requestDefault:)``.
    package init(connection: DBusConnection) {
        self.connection = connection
        // Digits only: always a valid object path.
        path = try! ObjectPath("/org/bluezkit/agent\(Self.nextNumber.add(1, ordering: .relaxed).oldValue)")
        state = PosixMutex(State())
    }

    /// Whether bluetoothd holds the registration (until ``unregister()`` or bluetoothd's `Release`).
    package var isRegistered: Bool { state.withLock { $0.registered } }
    /// Whether `RequestDefaultAgent` succeeded for the current registration.
    package var isDefault: Bool { state.withLock { $0.registered && $0.isDefault } }
    /// The capability wanted from now on (``setCapability(_:)``), registered or on its way.
    package var wantedCapability: String { state.withLock { $0.capability } }
    /// The capability bluetoothd holds for the current registration; nil when not registered.
    package var registeredCapability: String? { state.withLock { $0.registered ? $0.registeredCapability : nil } }

    /// Routes requests to `responder` from now on (nil: the built-in just-works answers).
    package func setResponder(_ responder: Responder?) { state.withLock { $0.responder = responder } }

    /// Registers with `capability` from now on (`DisplayOnly`, `DisplayYesNo`, `KeyboardOnly`,
    /// `NoInputNoOutput`, `KeyboardDisplay`): when registered with another one, `UnregisterAgent`,
    /// `RegisterAgent` with it and, if it was asked for, `RequestDefaultAgent` again. bluetoothd
    /// fixes the capability at `RegisterAgent`. Failures are logged at debug level.
    ///
    /// The wanted capability is recorded before this returns, so changes apply in the order they
    /// were made: one task at a time registers again, until bluetoothd holds the last one wanted.
    package func setCapability(_ capability: String) {
        let start = state.withLock { state in
            state.capability = capability
            guard !state.busy, state.registered, state.registeredCapability != capability else { return false }
            state.busy = true
            return true
        }
        if start { Task { await self.followCapability() } }
    }

    /// Exports the agent and registers it: `AgentManager1.RegisterAgent(path, capability)`,
    /// then, only with `requestDefault`, `RequestDefaultAgent(path)` on `/org/bluez` (the
    /// default agent answers for pairings of every program; see the type's documentation).
    ///
    /// `AlreadyExists` (this connection has an agent registered already) and a failing
    /// `RequestDefaultAgent` are logged at debug level, not thrown: another agent then
    /// answers, which is what its owner wants. A refused `RequestDefaultAgent` unregisters the
    /// agent again (``withdraw()``), so that it does not wait in bluetoothd's queue to become the
    /// default later unasked. Throws what else `RegisterAgent` answers, such as
    /// `serviceUnknown` when bluetoothd is not running; the object is removed then.
    package func register(requestDefault: Bool = false) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            try await connection.export([makeInterface()], at: path, allowedCaller: BlueZNames.service)
            let capability = state.withLock { state in
                state.exported = true
                state.busy = true
                state.wantsDefault = requestDefault
                return state.capability
            }
            do throws(DBusError) {
                _ = try await manager("RegisterAgent", [.objectPath(path), .string(capability)])
                state.withLock { state in
                    state.registered = true
                    state.registeredCapability = capability
                }
            } catch  where error.name == "org.bluez.Error.AlreadyExists" {
                DBusLog.debug("agent \(path): this connection has an agent already: \(error)")
                state.withLock { $0.busy = false }
                return
            } catch {
                state.withLock { state in
                    state.exported = false
                    state.busy = false
                }
                connection.unexport(path)
                throw error
            }
            if requestDefault, await !requestDefaultAgent() { return await withdraw() }
            await followCapability()
        }
    }

    /// Unregisters an agent that asked to be the default and was refused: bluetoothd keeps every
    /// registered agent in its queue of default agents, so one left registered would become the
    /// default unasked once the agents before it leave.
    package func withdraw() async {
        DBusLog.debug("agent \(path): refused as the default agent: unregistering")
        await unregister()
    }

    /// `UnregisterAgent` (unless bluetoothd released the agent already), then removes the object.
    /// Errors are ignored: bluetoothd forgets the agent anyway when the connection closes.
    package func unregister() async {
        let (exported, registered, open) = state.withLock { state in
            defer { state = State(capability: state.capability, responder: state.responder) }
            return (state.exported, state.registered, state.open)
        }
        cancel(open.values)
        if registered { _ = try? await manager("UnregisterAgent", [.objectPath(path)]) }
        if exported { connection.unexport(path) }
    }

    /// Registers again while the wanted capability differs from the registered one, then ends `busy`.
    private func followCapability() async {
        while true {
            let next: String? = state.withLock { state in
                guard state.registered, state.registeredCapability != state.capability else {
                    state.busy = false
                    return nil
                }
                return state.capability
            }
            guard let next else { return }
            _ = try? await manager("UnregisterAgent", [.objectPath(path)])
            do throws(DBusError) {
                _ = try await manager("RegisterAgent", [.objectPath(path), .string(next)])
                state.withLock { $0.registeredCapability = next }
            } catch {
                DBusLog.debug("agent \(path): cannot register again as \(next): \(error)")
                state.withLock { state in
                    state.registered = false
                    state.isDefault = false
                    state.busy = false
                }
                return
            }
            if state.withLock({ $0.wantsDefault }), await !requestDefaultAgent() { return await withdraw() }
        }
    }

    /// `RequestDefaultAgent`; whether bluetoothd accepted it.
    private func requestDefaultAgent() async -> Bool {
        do throws(DBusError) {
            _ = try await manager("RequestDefaultAgent", [.objectPath(path)])
            state.withLock { $0.isDefault = true }
            return true
        } catch {
            state.withLock { $0.isDefault = false }
            DBusLog.debug("agent \(path): not the default agent: \(error)")
            return false
        }
    }

    private func manager(_ member: MemberName, _ arguments: [DBusValue]) async throws(DBusError) -> [DBusValue] {
        try await connection.call(
            destination: BlueZNames.service, path: BlueZNames.root, interface: BlueZNames.agentManager,
            member: member, arguments: arguments)
    }

    func cancel(_ invocations: some Sequence<DBusMethodInvocation>) {
        for invocation in invocations {
            invocation.reply(error: DBusError(name: Self.canceled, message: "cancelled by bluetoothd"))
        }
    }
}
