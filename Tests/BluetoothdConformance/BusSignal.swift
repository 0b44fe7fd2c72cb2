package import DBus

/// One signal bluetoothd sent, as a body looks at it.
public struct BusSignal: Sendable, CustomStringConvertible {
    /// The object that sent it.
    public let path: String
    /// Its interface.
    public let interface: String
    /// Its member (`InterfacesAdded`, `PropertiesChanged`).
    public let member: String
    /// Its arguments (empty when they could not be read).
    package let arguments: [DBusValue]

    package init(_ message: DBusMessage) {
        path = message.path?.rawValue ?? ""
        interface = message.interface?.rawValue ?? ""
        member = message.member?.rawValue ?? ""
        arguments = (try? message.arguments()) ?? []
    }

    /// `member object`, for reports.
    public var description: String {
        member == "PropertiesChanged" ? "\(member) \(path) \(changed.keys.sorted())" : "\(member) \(objectPath)"
    }

    /// The object it is about: the first argument of ObjectManager signals, else the path.
    public var objectPath: String {
        if member == "InterfacesAdded" || member == "InterfacesRemoved" {
            return arguments.first?.objectPathValue?.rawValue ?? ""
        }
        return path
    }

    /// For `InterfacesAdded`: the interfaces' names.
    public var addedInterfaces: [String] {
        guard member == "InterfacesAdded", arguments.count > 1 else { return [] }
        return (arguments[1].dictionaryEntries ?? []).compactMap { $0.key.stringValue }
    }

    /// For `InterfacesRemoved`: the interfaces' names.
    public var removedInterfaces: [String] {
        guard member == "InterfacesRemoved", arguments.count > 1 else { return [] }
        return arguments[1].stringArrayValue ?? []
    }

    /// For `PropertiesChanged`: the changed properties, unwrapped.
    package var changed: [String: DBusValue] {
        guard member == "PropertiesChanged", arguments.count > 1 else { return [:] }
        return (arguments[1].stringKeyedDictionary ?? [:]).mapValues(\.unwrappingVariants)
    }

    /// A `PropertiesChanged` of `interface` at `path` that changes `name` (to `value`, if given).
    package func changes(_ path: String, _ interface: String, _ name: String, to value: DBusValue? = nil) -> Bool {
        guard member == "PropertiesChanged", self.path == path, arguments.first?.stringValue == interface,
            let new = changed[name]
        else { return false }
        return value.map { $0 == new } ?? true
    }

    /// An `InterfacesAdded` of `interface` for an object at or below `prefix`.
    public func adds(_ interface: String, under prefix: String) -> Bool {
        member == "InterfacesAdded" && objectPath.hasPrefix(prefix + "/") && addedInterfaces.contains(interface)
    }
}
