internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// A validated D-Bus object path, such as `/org/bluez/hci0`.
package struct ObjectPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    package let rawValue: String

    /// Validates `rawValue` with libdbus's own rules; throws `invalidArgs` otherwise.
    package init(_ rawValue: String) throws(DBusError) {
        guard DBusNameCheck.valid(rawValue, dbus_validate_path) else {
            throw DBusError(.invalidArgs, "invalid object path '\(rawValue.debugEscaped)'")
        }
        self.rawValue = rawValue
    }

    /// Wraps a path that libdbus has already validated (read from a message).
    init(trusted rawValue: String) { self.rawValue = rawValue }

    package static let root = ObjectPath(trusted: "/")

    package var description: String { rawValue }
    package static func < (a: ObjectPath, b: ObjectPath) -> Bool { a.rawValue < b.rawValue }

    /// The path of a child element; `element` must be a valid path element
    /// (`[A-Za-z0-9_]+`), else `invalidArgs`.
    package func appending(_ element: String) throws(DBusError) -> ObjectPath {
        // One element only: "" would give back `/` itself, and "a/b" two levels.
        guard !element.isEmpty, !element.utf8.contains(UInt8(ascii: "/")) else {
            throw DBusError(.invalidArgs, "invalid object path element '\(element.debugEscaped)'")
        }
        return try ObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// True when `self` is `ancestor` or lies below it.
    package func isDescendant(of ancestor: ObjectPath) -> Bool {
        if ancestor.rawValue == "/" || ancestor == self { return true }
        return rawValue.hasPrefix(ancestor.rawValue)
            && rawValue.utf8.dropFirst(ancestor.rawValue.utf8.count).first == UInt8(ascii: "/")
    }

    /// The ancestor (or `self`) whose last element is the first one starting with `elementPrefix`;
    /// nil when no element does. A valid path cut at an element boundary is valid: nothing is
    /// checked again. Compares bytes: this runs for every notification on the `StartNotify` path,
    /// where Foundation's `range(of:)` cost ten times the rest of the lookup.
    package func ancestor(withElementPrefix elementPrefix: String) -> ObjectPath? {
        var path = rawValue
        var prefix = elementPrefix
        return path.withUTF8 { path in
            prefix.withUTF8 { prefix in
                let slash = UInt8(ascii: "/")
                var start = 0
                while start < path.count {
                    defer { start += 1 }
                    guard path[start] == slash, path.count - start - 1 >= prefix.count else { continue }
                    guard prefix.indices.allSatisfy({ path[start + 1 + $0] == prefix[$0] }) else { continue }
                    var end = start + 1 + prefix.count
                    while end < path.count, path[end] != slash { end += 1 }
                    let ancestor = UnsafeBufferPointer(rebasing: path[..<end])
                    return ObjectPath(trusted: String(decoding: ancestor, as: UTF8.self))
                }
                return nil
            }
        }
    }

    /// The parent path, or nil for `/`.
    package var parent: ObjectPath? {
        guard rawValue != "/" else { return nil }
        let slash = rawValue.lastIndex(of: "/")!
        return slash == rawValue.startIndex ? .root : ObjectPath(trusted: String(rawValue[..<slash]))
    }
}

/// A validated D-Bus type signature (zero or more complete types), such as `a{sv}`.
package struct DBusSignature: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let rawValue: String

    package init(_ rawValue: String) throws(DBusError) {
        guard DBusNameCheck.valid(rawValue, dbus_signature_validate) else {
            throw DBusError(.invalidSignature, "invalid signature '\(rawValue.debugEscaped)'")
        }
        self.rawValue = rawValue
    }

    init(trusted rawValue: String) { self.rawValue = rawValue }

    /// For literals in our own code only: an invalid literal is a programmer error and traps.
    package init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }

    package static let empty = DBusSignature(trusted: "")
    package var description: String { rawValue }

    /// True when the signature is exactly one complete type.
    package var isSingleCompleteType: Bool { DBusNameCheck.valid(rawValue, dbus_signature_validate_single) }
}

/// A validated bus name: unique (`:1.42`) or well-known (`org.bluez`).
package struct BusName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let rawValue: String
    package init(_ rawValue: String) throws(DBusError) {
        guard DBusNameCheck.valid(rawValue, dbus_validate_bus_name) else {
            throw DBusError(.invalidArgs, "invalid bus name '\(rawValue.debugEscaped)'")
        }
        self.rawValue = rawValue
    }
    init(trusted rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    package var isUnique: Bool { rawValue.hasPrefix(":") }
    package var description: String { rawValue }
    package static let bus = BusName(trusted: "org.freedesktop.DBus")
}

/// A validated interface name, such as `org.bluez.Device1`.
package struct InterfaceName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let rawValue: String
    package init(_ rawValue: String) throws(DBusError) {
        guard DBusNameCheck.valid(rawValue, dbus_validate_interface) else {
            throw DBusError(.invalidArgs, "invalid interface name '\(rawValue.debugEscaped)'")
        }
        self.rawValue = rawValue
    }
    init(trusted rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    package var description: String { rawValue }

    package static let properties = InterfaceName(trusted: "org.freedesktop.DBus.Properties")
    package static let objectManager = InterfaceName(trusted: "org.freedesktop.DBus.ObjectManager")
    package static let introspectable = InterfaceName(trusted: "org.freedesktop.DBus.Introspectable")
    package static let peer = InterfaceName(trusted: "org.freedesktop.DBus.Peer")
    package static let bus = InterfaceName(trusted: "org.freedesktop.DBus")
}

/// A validated member (method or signal) name, such as `ReadValue`.
package struct MemberName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let rawValue: String
    package init(_ rawValue: String) throws(DBusError) {
        guard DBusNameCheck.valid(rawValue, dbus_validate_member) else {
            throw DBusError(.invalidArgs, "invalid member name '\(rawValue.debugEscaped)'")
        }
        self.rawValue = rawValue
    }
    init(trusted rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }
    package var description: String { rawValue }
}

/// Validation through libdbus's checkers, which never abort (they take a NULL error).
enum DBusNameCheck {
    static func valid(
        _ string: String,
        _ check: (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t
    ) -> Bool {
        let count = string.utf8.count
        // One pass for both: a NUL inside would end the C string early.
        return string.withCString { strlen($0) == count && check($0, nil) != 0 }
    }
}

extension String {
    /// The string with control characters escaped, for error messages about hostile input.
    var debugEscaped: String {
        let escaped = unicodeScalars.map {
            $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0)
        }.joined()
        return escaped.count > 200 ? String(escaped.prefix(200)) + "…" : escaped
    }
}
