package import DBus
import Synchronization

/// A pairing agent (`org.bluez.Agent1`) with the `NoInputNoOutput` capability:
/// "just works" pairing with nobody at a keyboard or a screen.
///
/// bluetoothd asks the default agent whenever a pairing nobody's own agent
/// covers needs a decision: an incoming pairing request, a just-works
/// confirmation, a service authorization. Without any agent it rejects those
/// ("No agent available for request type …") and, unless `AlwaysPairable` is
/// set in main.conf, keeps the adapters non-bondable. This agent accepts
/// confirmations and authorizations and rejects what would need a PIN or a
/// passkey typed or shown, as `doc/agent-api.txt` prescribes for an agent
/// that has neither. Only bluetoothd may call it.
///
/// bluetoothd keeps one agent per D-Bus connection (`RegisterAgent` answers
/// `AlreadyExists` for a second one); registrations end when the connection
/// closes or bluetoothd restarts (register again then).
package final class BlueZAgent: Sendable {
    /// The capability this agent registers with.
    package static let capability = "NoInputNoOutput"
    /// The error a request this agent cannot serve is answered with.
    package static let rejected = "org.bluez.Error.Rejected"

    private static let nextNumber = Atomic<Int>(0)
    /// The connection the agent is exported on and registered from.
    package let connection: DBusConnection
    /// The agent's object path, unique per instance (`/org/bluezkit/agentN`).
    package let path: ObjectPath
    private let state: Mutex<State>

    private struct State {
        var exported = false
        var registered = false
        var isDefault = false
    }

    /// Creates an agent on `connection`; nothing is exported or registered until ``register(requestDefault:)``.
    package init(connection: DBusConnection) {
        self.connection = connection
        // Digits only: always a valid object path.
        path = try! ObjectPath("/org/bluezkit/agent\(Self.nextNumber.add(1, ordering: .relaxed).oldValue)")
        state = Mutex(State())
    }

    /// Whether bluetoothd holds the registration (until ``unregister()`` or bluetoothd's `Release`).
    package var isRegistered: Bool { state.withLock { $0.registered } }
    /// Whether `RequestDefaultAgent` succeeded for the current registration.
    package var isDefault: Bool { state.withLock { $0.registered && $0.isDefault } }

    /// Exports the agent and registers it: `AgentManager1.RegisterAgent(path, "NoInputNoOutput")`,
    /// then, with `requestDefault`, `RequestDefaultAgent(path)` on `/org/bluez`.
    ///
    /// `AlreadyExists` (this connection has an agent registered already) and a failing
    /// `RequestDefaultAgent` are logged at debug level, not thrown: another agent then
    /// answers, which is what its owner wants. Throws what else `RegisterAgent` answers,
    /// such as `serviceUnknown` when bluetoothd is not running; the object is removed then.
    package func register(requestDefault: Bool = true) async throws(DBusError) {
        try await connection.export([makeInterface()], at: path, allowedCaller: BlueZNames.service)
        state.withLock { $0.exported = true }
        do throws(DBusError) {
            _ = try await manager("RegisterAgent", [.objectPath(path), .string(Self.capability)])
            state.withLock { $0.registered = true }
        } catch  where error.name == "org.bluez.Error.AlreadyExists" {
            DBusLog.debug("agent \(path): this connection has an agent already: \(error)")
            return
        } catch {
            state.withLock { $0.exported = false }
            connection.unexport(path)
            throw error
        }
        guard requestDefault else { return }
        do throws(DBusError) {
            _ = try await manager("RequestDefaultAgent", [.objectPath(path)])
            state.withLock { $0.isDefault = true }
        } catch {
            DBusLog.debug("agent \(path): not the default agent: \(error)")
        }
    }

    /// `UnregisterAgent` (unless bluetoothd released the agent already), then removes the object.
    /// Errors are ignored: bluetoothd forgets the agent anyway when the connection closes.
    package func unregister() async {
        let (exported, registered) = state.withLock { state in
            defer { state = State() }
            return (state.exported, state.registered)
        }
        if registered { _ = try? await manager("UnregisterAgent", [.objectPath(path)]) }
        if exported { connection.unexport(path) }
    }

    private func manager(_ member: MemberName, _ arguments: [DBusValue]) async throws(DBusError) -> [DBusValue] {
        try await connection.call(
            destination: BlueZNames.service, path: BlueZNames.root, interface: BlueZNames.agentManager,
            member: member, arguments: arguments)
    }

    private func makeInterface() -> DBusInterface {
        let path = path
        func accept(_ what: String) -> @Sendable (DBusMethodInvocation) -> Void {
            { invocation in
                DBusLog.debug("agent \(path): \(what) \(Self.device(invocation)): accepted (just works)")
                invocation.reply()
            }
        }
        func reject(_ what: String) -> @Sendable (DBusMethodInvocation) -> Void {
            { invocation in
                DBusLog.debug("agent \(path): \(what) \(Self.device(invocation)): rejected (\(Self.capability))")
                invocation.reply(error: DBusError(name: Self.rejected, message: "\(what) needs input or a display"))
            }
        }
        return DBusInterface(
            BlueZNames.agent,
            methods: [
                // Weakly: the connection keeps the handlers, and the agent the connection.
                DBusMethod("Release") { [weak self] invocation in
                    self?.state.withLock { $0.registered = false }
                    DBusLog.debug("agent \(path): released by bluetoothd")
                    invocation.reply()
                },
                DBusMethod("RequestPinCode", in: "o", out: "s", handler: reject("RequestPinCode")),
                DBusMethod("DisplayPinCode", in: "os", handler: reject("DisplayPinCode")),
                DBusMethod("RequestPasskey", in: "o", out: "u", handler: reject("RequestPasskey")),
                // bluetoothd sends DisplayPasskey without waiting for a reply; there is nothing to show it on.
                DBusMethod("DisplayPasskey", in: "ouq", handler: accept("DisplayPasskey")),
                DBusMethod("RequestConfirmation", in: "ou", handler: accept("RequestConfirmation")),
                DBusMethod("RequestAuthorization", in: "o", handler: accept("RequestAuthorization")),
                DBusMethod("AuthorizeService", in: "os", handler: accept("AuthorizeService")),
                DBusMethod("Cancel") { invocation in
                    DBusLog.debug("agent \(path): request cancelled by bluetoothd")
                    invocation.reply()
                },
            ])
    }

    private static func device(_ invocation: DBusMethodInvocation) -> String {
        (try? invocation.arguments().first?.objectPathValue?.rawValue) ?? ""
    }
}
