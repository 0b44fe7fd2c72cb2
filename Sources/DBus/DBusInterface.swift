/// An interface we export on an object: its methods, properties and signals.
///
/// Handlers and property accessors run on the connection's queue and must not block.
package struct DBusInterface: Sendable {
    package let name: InterfaceName
    package let methods: [DBusMethod]
    package let properties: [DBusProperty]
    package let signals: [DBusSignalDescription]

    package init(
        _ name: InterfaceName, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
        signals: [DBusSignalDescription] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    func method(_ member: String) -> DBusMethod? { methods.first { $0.name.rawValue == member } }
    func property(_ name: String) -> DBusProperty? { properties.first { $0.name == name } }

    /// Every readable property that currently has a value, as an `a{sv}` dictionary.
    var propertyValues: DBusValue {
        var values: [String: DBusValue] = [:]
        for property in properties where property.access != .write {
            if let value = property.get?() { values[property.name] = value }
        }
        return .stringVariantDictionary(values)
    }
}

/// One exported method: the argument signatures it accepts and returns, and its handler.
///
/// A call whose arguments do not match `inSignature` is answered `InvalidArgs`
/// before the handler runs. The handler answers through the invocation, now
/// or later, exactly once.
package struct DBusMethod: Sendable {
    package let name: MemberName
    package let inSignature: DBusSignature
    package let outSignature: DBusSignature
    package let handler: @Sendable (DBusMethodInvocation) -> Void

    package init(
        _ name: MemberName, in inSignature: DBusSignature = .empty, out outSignature: DBusSignature = .empty,
        handler: @escaping @Sendable (DBusMethodInvocation) -> Void
    ) {
        self.name = name
        self.inSignature = inSignature
        self.outSignature = outSignature
        self.handler = handler
    }
}

/// One exported property with its accessors.
package struct DBusProperty: Sendable {
    package enum Access: String, Sendable {
        case read, write, readwrite
    }

    package let name: String
    package let signature: DBusSignature
    package let access: Access
    /// The current value; nil when the property is absent right now (left out of `GetAll`).
    package let get: (@Sendable () -> DBusValue?)?
    /// Stores a new value (already checked against `signature`); throws to refuse it.
    package let set: (@Sendable (DBusValue) throws(DBusError) -> Void)?

    package init(
        _ name: String, _ signature: DBusSignature, get: (@Sendable () -> DBusValue?)?,
        set: (@Sendable (DBusValue) throws(DBusError) -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.get = get
        self.set = set
        self.access = get == nil ? .write : (set == nil ? .read : .readwrite)
    }
}

/// A signal an interface may emit, for introspection.
package struct DBusSignalDescription: Sendable {
    package let name: MemberName
    package let signature: DBusSignature
    package init(_ name: MemberName, _ signature: DBusSignature = .empty) {
        self.name = name
        self.signature = signature
    }
}
