internal import DBus

/// `org.bluez.GattManager1` on each adapter: registering local GATT applications (`src/gatt-database.c`).
extension SimulatorCore {
    static let gattManagerInterface = "org.bluez.GattManager1"

    /// One registration, pending (its tree not read yet) or done (`struct gatt_app` in `database->apps`).
    struct ApplicationRegistration: Sendable {
        let adapter: String
        let owner: String
        let root: ObjectPath
        /// Nil while bluetoothd waits for the application's `GetManagedObjects` reply.
        var application: SimulatedGATTApplication?
    }

    /// The adapter, caller and root object of a manager's `Register…`/`Unregister…` call (whose
    /// first argument is the root, as for `GattManager1` and `AdvertisementMonitorManager1`); nil
    /// once the call was answered with the error.
    func registrationCall(_ invocation: DBusMethodInvocation, _ path: ObjectPath, _ arguments: [DBusValue])
        -> (adapter: AdapterState, sender: String, root: ObjectPath)?
    {
        guard let adapter = adapter(at: path) else {
            reply(invocation, error: BlueZErrors.unknownObject(path.rawValue))
            return nil
        }
        guard let root = arguments.first?.objectPathValue else {
            reply(invocation, error: BlueZErrors.invalidArguments())
            return nil
        }
        return (adapter, invocation.sender?.rawValue ?? "", root)
    }

    func handleGattManagerCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, _ arguments: [DBusValue]
    ) {
        guard let (adapter, sender, root) = registrationCall(invocation, path, arguments) else { return }
        let index = applications.firstIndex { $0.adapter == adapter.name && $0.owner == sender && $0.root == root }
        switch member {
        case "RegisterApplication":
            guard index == nil else { return reply(invocation, error: BlueZErrors.alreadyExists) }
            guard let connection, let owner = try? BusName(sender) else {
                return reply(invocation, error: BlueZErrors.failed("Failed to register application"))
            }
            let registration = ApplicationRegistration(adapter: adapter.name, owner: sender, root: root)
            applications.append(registration)
            readApplication(registration, from: owner, on: connection, replyTo: invocation)
        case "UnregisterApplication":
            guard let index, applications[index].application != nil else {
                return reply(invocation, error: BlueZErrors.doesNotExist)
            }
            applications.remove(at: index)
            reply(invocation)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }

    /// Calls the application's `GetManagedObjects`, then validates the tree and answers `RegisterApplication`.
    private func readApplication(
        _ registration: ApplicationRegistration, from owner: BusName, on connection: DBusConnection,
        replyTo invocation: DBusMethodInvocation
    ) {
        let epoch = self.epoch
        Task {
            var reply: DBusValue?
            do {
                reply = try await connection.call(
                    destination: owner, path: registration.root, interface: "org.freedesktop.DBus.ObjectManager",
                    member: "GetManagedObjects"
                ).first
            } catch {
                reply = nil
            }
            self.perform(ifEpoch: epoch) { [reply] in
                self.finishRegistration(registration, reply, invocation)
            }
        }
    }

    private func finishRegistration(
        _ registration: ApplicationRegistration, _ tree: DBusValue?, _ invocation: DBusMethodInvocation
    ) {
        let index = applications.firstIndex {
            $0.adapter == registration.adapter && $0.owner == registration.owner && $0.root == registration.root
                && $0.application == nil
        }
        guard let index else {
            // The owner left the bus (or the adapter went away) while bluetoothd waited.
            return reply(invocation, error: BlueZErrors.failed("No object received"))
        }
        switch GATTApplicationParser.parse(tree, owner: registration.owner, root: registration.root) {
        case .success(let application):
            applications[index].application = application
            reply(invocation)
        case .failure(let error):
            applications.remove(at: index)
            reply(invocation, error: error)
        }
    }

    /// Drops every application of a client that left the bus (`app_disconnect_cb`).
    func applicationOwnerLeft(_ owner: String) {
        applications.removeAll { $0.owner == owner }
        applicationNotifyCounts = applicationNotifyCounts.filter { !$0.key.hasPrefix(owner + " ") }
        for key in applicationNotifySockets.keys where key.hasPrefix(owner + " ") { closeApplicationNotifySocket(key) }
    }

    /// The registered applications of `adapter`, in registration order.
    func registeredApplications(adapter: String) -> [SimulatedGATTApplication] {
        run { applications.filter { $0.adapter == adapter }.compactMap(\.application) }
    }
}
