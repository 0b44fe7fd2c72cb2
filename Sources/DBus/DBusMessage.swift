internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus message: a method call, a method return, an error or a signal.
///
/// Owns one reference to a libdbus `DBusMessage`. A message is complete when
/// it is created (its arguments are appended by the factory methods) and is
/// never mutated afterwards, so sharing it across threads is safe: that is the
/// invariant behind `@unchecked Sendable`.
package final class DBusMessage: @unchecked Sendable, CustomStringConvertible {
    let raw: OpaquePointer

    /// Takes over one reference to `raw`.
    init(owning raw: OpaquePointer) { self.raw = raw }

    /// Adds a reference to `raw`.
    init(retaining raw: OpaquePointer) {
        self.raw = dbus_message_ref(raw)
    }

    deinit { dbus_message_unref(raw) }

    /// The kinds of message.
    package enum Kind: Sendable, Hashable {
        case methodCall, methodReturn, error, signal, invalid
    }

    // MARK: Factories

    /// A method call to `destination` (nil for a peer-to-peer connection).
    package static func methodCall(
        destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
        arguments: [DBusValue] = []
    ) throws(DBusError) -> DBusMessage {
        DBusMessage(
            owning: try newMethodCall(
                destination: destination, path: path, interface: interface, member: member, arguments: arguments))
    }

    /// A libdbus method call with its arguments appended, owned by the caller (who unrefs it):
    /// for ``DBusConnection/call(destination:path:interface:member:arguments:timeout:)``, which
    /// needs no Swift object around it.
    static func newMethodCall(
        destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
        arguments: [DBusValue]
    ) throws(DBusError) -> OpaquePointer {
        let made = path.rawValue.withCString { path in
            member.rawValue.withCString { member in
                (destination?.rawValue).withOptionalCString { destination in
                    (interface?.rawValue).withOptionalCString { interface in
                        dbus_message_new_method_call(destination, path, interface, member)
                    }
                }
            }
        }
        guard let raw = made else { throw DBusError(.noMemory, "cannot allocate a method call") }
        do throws(DBusError) {
            try append(arguments, to: raw)
        } catch {
            dbus_message_unref(raw)
            throw error
        }
        return raw
    }

    /// A signal from `path`.
    package static func signal(
        path: ObjectPath, interface: InterfaceName, member: MemberName, destination: BusName? = nil,
        arguments: [DBusValue] = []
    ) throws(DBusError) -> DBusMessage {
        guard let raw = Self.newSignal(path: path, interface: interface, member: member) else {
            throw DBusError(.noMemory, "cannot allocate a signal")
        }
        let message = DBusMessage(owning: raw)
        if let destination { destination.rawValue.withCString { _ = dbus_message_set_destination(raw, $0) } }
        try Self.append(arguments, to: raw)
        return message
    }

    /// A new libdbus signal message with no body yet; nil when libdbus is out of memory.
    static func newSignal(path: ObjectPath, interface: InterfaceName, member: MemberName) -> OpaquePointer? {
        path.rawValue.withCString { path in
            interface.rawValue.withCString { interface in
                member.rawValue.withCString { member in dbus_message_new_signal(path, interface, member) }
            }
        }
    }

    /// A successful reply to the method call `call`.
    package static func methodReturn(to call: DBusMessage, arguments: [DBusValue] = []) throws(DBusError)
        -> DBusMessage
    {
        // libdbus aborts on a reply to a message that was never sent (serial 0).
        guard call.serial != 0 else { throw DBusError(.invalidArgs, "cannot reply to a message that was never sent") }
        guard let raw = dbus_message_new_method_return(call.raw) else {
            throw DBusError(.noMemory, "cannot allocate a method return")
        }
        let message = DBusMessage(owning: raw)
        try Self.append(arguments, to: raw)
        return message
    }

    /// An error reply to the method call `call`. An invalid error name is replaced by `Failed`.
    package static func errorReply(to call: DBusMessage, error: DBusError) -> DBusMessage? {
        guard call.serial != 0 else { return nil }
        let name = DBusNameCheck.valid(error.name, dbus_validate_error_name) ? error.name : DBusError.name(for: .failed)
        let text = error.message.replacingNULs
        guard let raw = dbus_message_new_error(call.raw, name, text) else { return nil }
        return DBusMessage(owning: raw)
    }

    private static func append(_ arguments: [DBusValue], to raw: OpaquePointer) throws(DBusError) {
        guard !arguments.isEmpty else { return }
        var signature = ""
        for argument in arguments { signature += try argument.validatedSignature() }
        guard signature.utf8.count <= 255 else {
            throw DBusError(.invalidSignature, "message signature longer than 255 characters")
        }
        // More than 32 nested arrays or structs make a message the bus refuses. A signature of at
        // most 32 characters cannot nest that deep, and is otherwise valid as `validatedSignature`
        // built it (from checked element, key and value signatures): libdbus checks the longer.
        guard signature.utf8.count <= 32 || DBusNameCheck.valid(signature, dbus_signature_validate) else {
            throw DBusError(.invalidSignature, "message signature '\(signature.debugEscaped)' is not valid")
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for argument in arguments { try argument.append(to: &iter) }
    }

    // MARK: Header fields

    package var kind: Kind {
        switch dbus_message_get_type(raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: return .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: return .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: return .error
        case CDBUS_MESSAGE_TYPE_SIGNAL: return .signal
        default: return .invalid
        }
    }

    package var path: ObjectPath? { dbus_message_get_path(raw).map { ObjectPath(trusted: String(cString: $0)) } }
    /// Whether the message's path is `path`, compared with libdbus's C string (no Swift string
    /// is made).
    package func hasPath(_ path: ObjectPath) -> Bool {
        path.rawValue.withCString { dbus_message_has_path(raw, $0) != 0 }
    }
    package var interface: InterfaceName? {
        dbus_message_get_interface(raw).map { InterfaceName(trusted: String(cString: $0)) }
    }
    package var member: MemberName? { dbus_message_get_member(raw).map { MemberName(trusted: String(cString: $0)) } }
    package var sender: BusName? { dbus_message_get_sender(raw).map { BusName(trusted: String(cString: $0)) } }
    package var destination: BusName? {
        dbus_message_get_destination(raw).map { BusName(trusted: String(cString: $0)) }
    }
    package var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    package var signature: DBusSignature {
        dbus_message_get_signature(raw).map { DBusSignature(trusted: String(cString: $0)) } ?? .empty
    }
    package var serial: UInt32 { dbus_message_get_serial(raw) }
    package var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }
    /// True when the caller asked for no reply.
    package var noReplyExpected: Bool { dbus_message_get_no_reply(raw) != 0 }

    /// Whether the header names `interface` and `member` (cheap: compares C strings, no allocation).
    package func isMember(_ member: MemberName, of interface: InterfaceName) -> Bool {
        member.rawValue.withCString { dbus_message_has_member(raw, $0) != 0 }
            && interface.rawValue.withCString { dbus_message_has_interface(raw, $0) != 0 }
    }

    // MARK: Body

    /// All arguments, decoded.
    package func arguments() throws(DBusError) -> [DBusValue] { try Self.arguments(of: raw) }

    /// All arguments of the libdbus message `raw`, decoded.
    static func arguments(of raw: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        // The signature's length bounds the number of arguments: one allocation, no growth.
        let bound = dbus_message_get_signature(raw).map { strlen($0) } ?? 0
        return try DBusValue.readAll(from: &iter, capacity: bound)
    }

    /// The arguments when the body's signature is exactly `expected`, else `invalidArgs`.
    package func arguments(expecting expected: DBusSignature) throws(DBusError) -> [DBusValue] {
        let actual = signature
        guard actual == expected else {
            throw DBusError(.invalidArgs, "expected arguments '\(expected)', got '\(actual)'")
        }
        return try arguments()
    }

    /// For an error message, the error it carries (name and first string argument).
    package var error: DBusError? { Self.error(of: raw) }

    /// For the libdbus error message `raw`, the error it carries; nil for another kind.
    static func error(of raw: OpaquePointer) -> DBusError? {
        guard dbus_message_get_type(raw) == CDBUS_MESSAGE_TYPE_ERROR,
            let name = dbus_message_get_error_name(raw).map({ String(cString: $0) })
        else { return nil }
        var text = ""
        var iter = DBusMessageIter()
        if dbus_message_iter_init(raw, &iter) != 0, dbus_message_iter_get_arg_type(&iter) == CDBUS_TYPE_STRING {
            text = DBusValue.readString(&iter)
        }
        return DBusError(name: name, message: text)
    }

    package var description: String {
        let head = [
            "\(kind)", sender.map { "from \($0)" }, destination.map { "to \($0)" }, path.map { "\($0)" },
            interface.map { "\($0)" }, member.map { "\($0)" }, errorName,
        ]
        return head.compactMap { $0 }.joined(separator: " ") + " (\(signature))"
    }
}

extension String {
    var replacingNULs: String {
        containsNUL ? String(decoding: utf8.map { $0 == 0 ? UInt8(ascii: "?") : $0 }, as: UTF8.self) : self
    }
}
