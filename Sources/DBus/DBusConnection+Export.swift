import Foundation

extension DBusConnection {
    /// Exports an object with `interfaces` at `path` (replacing what was there).
    ///
    /// With `allowedCaller`, only that name (or, for a well-known name, its
    /// current owner) may call the object; everyone else gets `AccessDenied`.
    /// Announces the object with `InterfacesAdded` when an object manager of
    /// ours lies above it.
    package func export(_ interfaces: [DBusInterface], at path: ObjectPath, allowedCaller: BusName? = nil)
        async throws(DBusError)
    {
        let tracking = try await ownerTracking(for: allowedCaller)
        try onQueueThrowing { () throws(DBusError) in
            // Exported objects outlive a lost bus: they are served again once reconnected.
            guard isOpen || lifecycle.isReconnecting else {
                throw DBusError(.disconnected, "the connection is closed")
            }
            objects.objects[path] = ObjectTree.Object(
                interfaces: interfaces, allowedCaller: allowedCaller, ownerTracking: tracking)
            if let manager = objects.manager(above: path) {
                emit(
                    path: manager, interface: .objectManager, member: "InterfacesAdded",
                    arguments: [.objectPath(path), ObjectTree.interfacesAndProperties(interfaces)])
            }
        }
    }

    /// Removes the object at `path`, announcing `InterfacesRemoved` under a manager.
    package func unexport(_ path: ObjectPath) {
        onQueue {
            guard let object = objects.objects.removeValue(forKey: path) else { return }
            if let manager = objects.manager(above: path) {
                emit(
                    path: manager, interface: .objectManager, member: "InterfacesRemoved",
                    arguments: [.objectPath(path), .stringArray(object.interfaces.map(\.name.rawValue))])
            }
        }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for the objects below it.
    package func addObjectManager(at path: ObjectPath, allowedCaller: BusName? = nil) async throws(DBusError) {
        let tracking = try await ownerTracking(for: allowedCaller)
        onQueue {
            objects.managers[path] = ObjectTree.Object(
                interfaces: [], allowedCaller: allowedCaller, ownerTracking: tracking)
        }
    }

    /// Stops serving the object manager at `path`.
    package func removeObjectManager(at path: ObjectPath) {
        onQueue { _ = objects.managers.removeValue(forKey: path) }
    }

    /// Sends every method call to a path at or below `prefix` that has no object of its own to `handler`.
    package func exportSubtree(
        at prefix: ObjectPath, allowedCaller: BusName? = nil,
        handler: @escaping @Sendable (DBusMethodInvocation) -> Void
    ) async throws(DBusError) {
        let tracking = try await ownerTracking(for: allowedCaller)
        onQueue {
            objects.subtrees[prefix] = ObjectTree.Subtree(
                allowedCaller: allowedCaller, ownerTracking: tracking, handler: handler)
        }
    }

    package func unexportSubtree(at prefix: ObjectPath) {
        onQueue { _ = objects.subtrees.removeValue(forKey: prefix) }
    }

    /// Emits `PropertiesChanged` for an object of ours.
    package func emitPropertiesChanged(
        path: ObjectPath, interface: InterfaceName, changed: [String: DBusValue], invalidated: [String] = []
    ) {
        emit(
            path: path, interface: .properties, member: DBusMessage.propertiesChangedMember,
            arguments: [.string(interface.rawValue), .stringVariantDictionary(changed), .stringArray(invalidated)])
    }

    /// Emits `PropertiesChanged` for an object of ours to the current owner of `name` only: a
    /// unicast signal, which the bus delivers to that connection alone (no other connection's
    /// match rule sees it, short of eavesdropping, which the system bus's policy denies).
    ///
    /// The owner is the one tracked for `name` as an allowed caller or a match rule's sender;
    /// when `name` is not tracked, the signal is addressed to `name` itself, which the bus
    /// resolves to its owner (and drops when it has none). Never a broadcast.
    package func emitPropertiesChanged(
        path: ObjectPath, interface: InterfaceName, changed: [String: DBusValue], invalidated: [String] = [],
        toOwnerOf name: BusName
    ) {
        let owner = onQueue { nameOwners[name]?.owner }
        emit(
            path: path, interface: .properties, member: DBusMessage.propertiesChangedMember,
            arguments: [.string(interface.rawValue), .stringVariantDictionary(changed), .stringArray(invalidated)],
            destination: owner ?? name)
    }

    /// Emits `PropertiesChanged(interface, {property: <ay value>}, [])` for an object of ours to
    /// the current owner of `name` only, as ``emitPropertiesChanged(path:interface:changed:invalidated:toOwnerOf:)``
    /// does for any properties: the same message, built the short way
    /// (``DBusMessage/bytesPropertyChanged(path:interface:property:value:destination:)``), for
    /// values sent many times a second. A property name with a NUL is dropped with a log line.
    package func emitBytesPropertyChanged(
        path: ObjectPath, interface: InterfaceName, property: String, value: [UInt8], toOwnerOf name: BusName
    ) {
        let owner = onQueue { nameOwners[name]?.owner }
        do {
            send(
                try DBusMessage.bytesPropertyChanged(
                    path: path, interface: interface, property: property, value: value, destination: owner ?? name))
        } catch {
            DBusLog.warning("cannot emit PropertiesChanged from \(path): \(error)")
        }
    }

    /// Emits a signal from `path`; values that cannot be marshalled are dropped with a log line.
    package func emit(
        path: ObjectPath, interface: InterfaceName, member: MemberName, arguments: [DBusValue],
        destination: BusName? = nil
    ) {
        do {
            send(
                try DBusMessage.signal(
                    path: path, interface: interface, member: member, destination: destination, arguments: arguments))
        } catch {
            DBusLog.warning("cannot emit \(interface).\(member) from \(path): \(error)")
        }
    }

    private func ownerTracking(for caller: BusName?) async throws(DBusError) -> DBusSubscription? {
        guard let caller, !caller.isUnique else { return nil }
        return try await trackOwner(of: caller)
    }

    // MARK: Incoming calls

    /// Answers a method call to our objects. On `queue`.
    func dispatchMethodCall(_ message: DBusMessage) {
        let invocation = DBusMethodInvocation(message: message, connection: self)
        guard let path = message.path, let member = message.member?.rawValue else {
            return invocation.reply(error: DBusError(.unknownMethod, "a method call needs a path and a member"))
        }
        let interface = message.interface?.rawValue
        let object = objects.objects[path]
        let manager = objects.managers[path]
        let subtree = object == nil && manager == nil ? objects.subtree(containing: path) : nil
        let known = object != nil || manager != nil || subtree != nil || !objects.childNames(of: path).isEmpty
        guard known else {
            return invocation.reply(error: DBusError(.unknownObject, "no object at \(path)"))
        }
        let allowed = object?.allowedCaller ?? manager?.allowedCaller ?? subtree?.1.allowedCaller
        guard isCallerAllowed(message, allowed) else {
            return invocation.reply(error: DBusError(.accessDenied, "only \(allowed!) may call \(path)"))
        }
        switch (interface, member) {
        case ("org.freedesktop.DBus.Introspectable", "Introspect"), (nil, "Introspect"):
            guard checkSignature(invocation, "") else { return }
            return invocation.reply([.string(objects.introspection(of: path))])
        case ("org.freedesktop.DBus.Peer", "Ping"), (nil, "Ping"):
            return invocation.reply()
        case ("org.freedesktop.DBus.Peer", "GetMachineId"):
            return invocation.reply([.string(Self.machineID)])
        case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects") where manager != nil,
            (nil, "GetManagedObjects") where manager != nil:
            guard checkSignature(invocation, "") else { return }
            return invocation.reply([objects.managedObjects(under: path)])
        case ("org.freedesktop.DBus.Properties", _) where object != nil:
            return handleProperties(invocation, member: member, object: object!)
        default:
            break
        }
        if let subtree {
            return subtree.1.handler(invocation)
        }
        let candidates = object?.interfaces.filter { interface == nil || $0.name.rawValue == interface } ?? []
        if let interface, candidates.isEmpty {
            return invocation.reply(error: DBusError(.unknownInterface, "\(path) has no interface \(interface)"))
        }
        guard let method = candidates.lazy.compactMap({ $0.method(member) }).first else {
            return invocation.reply(error: DBusError(.unknownMethod, "\(path) has no method \(member)"))
        }
        guard checkSignature(invocation, method.inSignature.rawValue) else { return }
        method.handler(invocation)
    }

    private func checkSignature(_ invocation: DBusMethodInvocation, _ expected: String) -> Bool {
        let actual = invocation.message.signature.rawValue
        guard actual == expected else {
            invocation.reply(error: DBusError(.invalidArgs, "expected arguments '\(expected)', got '\(actual)'"))
            return false
        }
        return true
    }

    private func isCallerAllowed(_ message: DBusMessage, _ allowed: BusName?) -> Bool {
        guard let allowed else { return true }
        guard let sender = message.sender else { return false }
        if sender == allowed { return true }
        return nameOwners[allowed]?.owner == sender
    }

    private func handleProperties(_ invocation: DBusMethodInvocation, member: String, object: ObjectTree.Object) {
        let signatures = ["Get": "ss", "GetAll": "s", "Set": "ssv"]
        guard let expected = signatures[member] else {
            return invocation.reply(error: DBusError(.unknownMethod, "Properties has no method \(member)"))
        }
        guard checkSignature(invocation, expected), let args = try? invocation.arguments(),
            let interfaceName = args.first?.stringValue
        else { return }
        guard let interface = object.interface(interfaceName) else {
            return invocation.reply(error: DBusError(.unknownInterface, "no interface \(interfaceName)"))
        }
        if member == "GetAll" { return invocation.reply([interface.propertyValues]) }
        guard let name = args[1].stringValue, let property = interface.property(name) else {
            return invocation.reply(error: DBusError(.unknownProperty, "no property \(args[1])"))
        }
        if member == "Get" {
            guard let get = property.get else {
                return invocation.reply(error: DBusError(.accessDenied, "\(name) is write-only"))
            }
            guard let value = get() else {
                return invocation.reply(error: DBusError(.unknownProperty, "\(name) has no value"))
            }
            return invocation.reply([.variant(value)])
        }
        guard let set = property.set else {
            return invocation.reply(error: DBusError(.propertyReadOnly, "\(name) is read-only"))
        }
        guard case .variant(let value) = args[2], value.signature == property.signature else {
            return invocation.reply(
                error: DBusError(
                    .invalidArgs, "\(name) takes '\(property.signature)', got '\(args[2].unwrappingVariants.signature)'"
                ))
        }
        do throws(DBusError) {
            try set(value)
            invocation.reply()
        } catch {
            invocation.reply(error: error)
        }
    }

    static let machineID: String = {
        for path in ["/etc/machine-id", "/var/lib/dbus/machine-id"] {
            if let text = try? String(contentsOfFile: path, encoding: .utf8) {
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
        return "00000000000000000000000000000000"
    }()
}
