import DBus

/// One received signal.
struct Signal: Sendable, CustomStringConvertible {
    let path: String
    let interface: String
    let member: String
    let arguments: [DBusValue]
    /// The sender's serial number: the order in which bluetoothd sent it, among its replies too.
    let serial: UInt32

    init(_ message: DBusMessage) {
        serial = message.serial
        path = message.path?.rawValue ?? ""
        interface = message.interface?.rawValue ?? ""
        member = message.member?.rawValue ?? ""
        arguments = (try? message.arguments()) ?? []
    }

    var description: String { "\(member) \(objectPath) \(arguments)" }

    /// The object a signal is about: the first argument of ObjectManager signals, else the path.
    var objectPath: String {
        if member == "InterfacesAdded" || member == "InterfacesRemoved" {
            return arguments.first?.objectPathValue?.rawValue ?? ""
        }
        return path
    }

    var isPropertiesChanged: Bool { member == "PropertiesChanged" }
    var changedInterface: String { arguments.first?.stringValue ?? "" }
    var changed: [String: DBusValue] {
        guard arguments.count > 1 else { return [:] }
        return (arguments[1].stringKeyedDictionary ?? [:]).mapValues(\.unwrappingVariants)
    }
    var invalidated: [String] { arguments.count > 2 ? arguments[2].stringArrayValue ?? [] : [] }

    /// For `InterfacesAdded`: interface → properties.
    var added: [String: [String: DBusValue]] { arguments.count > 1 ? Self.interfaces(arguments[1]) : [:] }
    /// For `InterfacesRemoved`: the interface names.
    var removed: [String] { arguments.count > 1 ? arguments[1].stringArrayValue ?? [] : [] }

    static func interfaces(_ value: DBusValue) -> [String: [String: DBusValue]] {
        var result: [String: [String: DBusValue]] = [:]
        for entry in value.dictionaryEntries ?? [] {
            guard let name = entry.key.stringValue else { continue }
            result[name] = (entry.value.stringKeyedDictionary ?? [:]).mapValues(\.unwrappingVariants)
        }
        return result
    }

    /// A `PropertiesChanged` of `interface` at `path` that changes `name` (to `value`, if given).
    func changes(_ path: String, _ interface: String, _ name: String, to value: DBusValue? = nil) -> Bool {
        guard isPropertiesChanged, self.path == path, changedInterface == interface, let new = changed[name] else {
            return false
        }
        return value.map { $0 == new } ?? true
    }
}
