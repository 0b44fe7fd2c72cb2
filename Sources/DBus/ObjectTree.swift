/// Our exported objects, object managers and subtrees. Queue-confined value
/// owned by the connection.
struct ObjectTree {
    /// One exported object.
    struct Object {
        var interfaces: [DBusInterface]
        var allowedCaller: BusName?
        /// Keeps the owner of `allowedCaller` tracked while the object lives.
        var ownerTracking: DBusSubscription?

        func interface(_ name: String) -> DBusInterface? { interfaces.first { $0.name.rawValue == name } }
    }

    /// A handler for every path below a prefix that has no object of its own.
    struct Subtree {
        var allowedCaller: BusName?
        var ownerTracking: DBusSubscription?
        var handler: @Sendable (DBusMethodInvocation) -> Void
    }

    var objects: [ObjectPath: Object] = [:]
    /// Object managers by path, with the caller allowed to use them.
    var managers: [ObjectPath: Object] = [:]
    var subtrees: [ObjectPath: Subtree] = [:]

    mutating func removeAll() {
        objects.removeAll()
        managers.removeAll()
        subtrees.removeAll()
    }

    /// The object manager that reports `path` (the closest manager strictly above it).
    func manager(above path: ObjectPath) -> ObjectPath? {
        var current = path.parent
        while let candidate = current {
            if managers[candidate] != nil { return candidate }
            current = candidate.parent
        }
        return nil
    }

    /// The subtree whose prefix is the longest one containing `path`.
    func subtree(containing path: ObjectPath) -> (ObjectPath, Subtree)? {
        var current: ObjectPath? = path
        while let candidate = current {
            if let subtree = subtrees[candidate] { return (candidate, subtree) }
            current = candidate.parent
        }
        return nil
    }

    /// The names of the direct children of `path` that lead to exported objects (for introspection).
    func childNames(of path: ObjectPath) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names = Set<String>()
        for other in objects.keys.map(\.rawValue) + managers.keys.map(\.rawValue) where other.hasPrefix(prefix) {
            if let name = other.dropFirst(prefix.count).split(separator: "/").first { names.insert(String(name)) }
        }
        return names.sorted()
    }

    /// `a{oa{sa{sv}}}` for everything a manager at `path` reports.
    func managedObjects(under path: ObjectPath) -> DBusValue {
        var entries: [DBusValue.DictionaryEntry] = []
        for (objectPath, object) in objects.sorted(by: { $0.key < $1.key })
        where objectPath != path && objectPath.isDescendant(of: path) {
            entries.append(.init(.objectPath(objectPath), Self.interfacesAndProperties(object.interfaces)))
        }
        return .dictionary(key: "o", value: "a{sa{sv}}", entries)
    }

    static func interfacesAndProperties(_ interfaces: [DBusInterface]) -> DBusValue {
        .dictionary(
            key: "s", value: "a{sv}",
            interfaces.map { .init(.string($0.name.rawValue), $0.propertyValues) })
    }

    /// Introspection XML for `path`.
    func introspection(of path: ObjectPath) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        var interfaces = objects[path]?.interfaces ?? []
        if managers[path] != nil { interfaces.append(Self.objectManagerDescription) }
        interfaces += Self.standardDescriptions
        for interface in interfaces {
            xml += "  <interface name=\"\(interface.name)\">\n"
            for method in interface.methods {
                xml += "    <method name=\"\(method.name)\">\n"
                for type in Self.completeTypes(method.inSignature.rawValue) {
                    xml += "      <arg type=\"\(type.xmlEscaped)\" direction=\"in\"/>\n"
                }
                for type in Self.completeTypes(method.outSignature.rawValue) {
                    xml += "      <arg type=\"\(type.xmlEscaped)\" direction=\"out\"/>\n"
                }
                xml += "    </method>\n"
            }
            for signal in interface.signals {
                xml += "    <signal name=\"\(signal.name)\">\n"
                for type in Self.completeTypes(signal.signature.rawValue) {
                    xml += "      <arg type=\"\(type.xmlEscaped)\"/>\n"
                }
                xml += "    </signal>\n"
            }
            for property in interface.properties {
                xml +=
                    "    <property name=\"\(property.name.xmlEscaped)\" type=\"\(property.signature.rawValue.xmlEscaped)\" access=\"\(property.access.rawValue)\"/>\n"
            }
            xml += "  </interface>\n"
        }
        for child in childNames(of: path) { xml += "  <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }

    /// Splits a valid signature into its complete types.
    static func completeTypes(_ signature: String) -> [String] {
        var types: [String] = []
        var current = ""
        var depth = 0
        for character in signature {
            current.append(character)
            switch character {
            case "(", "{": depth += 1
            case ")", "}": depth -= 1
            default: break
            }
            if depth == 0 && character != "a" {
                types.append(current)
                current = ""
            }
        }
        return types
    }

    static let objectManagerDescription = DBusInterface(
        .objectManager,
        methods: [DBusMethod("GetManagedObjects", out: "a{oa{sa{sv}}}") { _ in }],
        signals: [
            DBusSignalDescription("InterfacesAdded", "oa{sa{sv}}"),
            DBusSignalDescription("InterfacesRemoved", "oas"),
        ])

    static let standardDescriptions = [
        DBusInterface(
            .properties,
            methods: [
                DBusMethod("Get", in: "ss", out: "v") { _ in }, DBusMethod("GetAll", in: "s", out: "a{sv}") { _ in },
                DBusMethod("Set", in: "ssv") { _ in },
            ],
            signals: [DBusSignalDescription("PropertiesChanged", "sa{sv}as")]),
        DBusInterface(.introspectable, methods: [DBusMethod("Introspect", out: "s") { _ in }]),
        DBusInterface(
            .peer,
            methods: [DBusMethod("Ping") { _ in }, DBusMethod("GetMachineId", out: "s") { _ in }]),
    ]
}

extension String {
    var xmlEscaped: String {
        var out = ""
        for c in self {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
