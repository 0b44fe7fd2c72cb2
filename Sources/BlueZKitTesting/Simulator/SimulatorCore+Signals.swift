internal import DBus

extension SimulatorCore {
    static let objectManagerInterface: InterfaceName = "org.freedesktop.DBus.ObjectManager"

    /// Announces interfaces of an object that now exists in the model.
    func interfacesAdded(_ path: ObjectPath, _ interfaces: [String]) {
        if let removed = pendingSignals.entries[path]?.removed, removed.contains(where: interfaces.contains) {
            flushObject(path)
        }
        pendingSignals.update(path) { entry in
            for interface in interfaces where !entry.added.contains(interface) { entry.added.append(interface) }
        }
    }

    /// Records that properties changed; with `flushNow`, sends the object's pending changes at once
    /// (`G_DBUS_PROPERTY_CHANGED_FLAG_FLUSH`, used for a characteristic's `Value`).
    func propertiesChanged(_ path: ObjectPath, _ interface: String, _ names: [String], flushNow: Bool = false) {
        if pendingSignals.entries[path]?.added.contains(interface) == true { return }
        pendingSignals.update(path) { entry in
            if let index = entry.changed.firstIndex(where: { $0.interface == interface }) {
                for name in names where !entry.changed[index].names.contains(name) {
                    entry.changed[index].names.append(name)
                }
            } else {
                entry.changed.append((interface, names))
            }
        }
        if flushNow { sendPropertyChanges(path) }
    }

    /// Records the removal of interfaces; call it while the object is still in the model.
    func interfacesRemoved(_ path: ObjectPath, _ interfaces: [String]) {
        if pendingSignals.entries[path]?.changed.contains(where: { interfaces.contains($0.interface) }) == true {
            sendPropertyChanges(path, only: interfaces)
        }
        pendingSignals.update(path) { entry in
            for interface in interfaces {
                if let index = entry.added.firstIndex(of: interface) {
                    entry.added.remove(at: index)
                } else if !entry.removed.contains(interface) {
                    entry.removed.append(interface)
                }
            }
        }
        if pendingSignals.entries[path]?.isEmpty == true { _ = pendingSignals.take(path) }
    }

    /// Sends every pending signal, object by object: in last-touched order at the end of a
    /// turn, in first-touched order before a reply (`beforeReply`).
    func flushSignals(beforeReply: Bool = false) {
        while let path = beforeReply ? pendingSignals.order.first : pendingSignals.idleOrder.first {
            flushObject(path)
        }
    }

    private func flushObject(_ path: ObjectPath) {
        guard let entry = pendingSignals.take(path) else { return }
        if !entry.added.isEmpty {
            let interfaces = entry.added.compactMap { name in
                properties(of: path, interface: name).map {
                    DBusValue.DictionaryEntry(.string(name), .stringVariantDictionary($0))
                }
            }
            if !interfaces.isEmpty {
                emitSignal(
                    .root, Self.objectManagerInterface, "InterfacesAdded",
                    [.objectPath(path), .dictionary(key: "s", value: "a{sv}", interfaces)])
            }
        }
        for change in entry.changed { emitChange(path, change.interface, change.names) }
        if !entry.removed.isEmpty {
            emitSignal(
                .root, Self.objectManagerInterface, "InterfacesRemoved",
                [.objectPath(path), .stringArray(entry.removed)])
        }
    }

    private func sendPropertyChanges(_ path: ObjectPath, only interfaces: [String]? = nil) {
        guard var entry = pendingSignals.entries[path] else { return }
        let sending = entry.changed.filter { interfaces?.contains($0.interface) ?? true }
        entry.changed.removeAll { interfaces?.contains($0.interface) ?? true }
        pendingSignals.entries[path] = entry
        if entry.isEmpty { _ = pendingSignals.take(path) }
        for change in sending { emitChange(path, change.interface, change.names) }
    }

    private func emitChange(_ path: ObjectPath, _ interface: String, _ names: [String]) {
        guard let values = properties(of: path, interface: interface), let name = try? InterfaceName(interface) else {
            return
        }
        var changed: [String: DBusValue] = [:]
        var invalidated: [String] = []
        for property in names {
            if let value = values[property] { changed[property] = value } else { invalidated.append(property) }
        }
        connection?.emitPropertiesChanged(path: path, interface: name, changed: changed, invalidated: invalidated)
    }

    func emitSignal(_ path: ObjectPath, _ interface: InterfaceName, _ member: MemberName, _ arguments: [DBusValue]) {
        connection?.emit(path: path, interface: interface, member: member, arguments: arguments)
    }
}
