// Mode 5: names and messages made through the validating inits and factories.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Mode 5: names and factories

func fuzzFactories(_ input: inout FuzzInput) {
    // Names: the validating inits agree with libdbus's validators and never trap.
    let text = FuzzText.string(&input, allowNUL: input.oneIn(8))
    fuzzCheck(
        ((try? ObjectPath(text)) != nil) == FuzzText.valid(text, dbus_validate_path), "ObjectPath(\(text.debugEscaped))"
    )
    fuzzCheck(((try? BusName(text)) != nil) == FuzzText.valid(text, dbus_validate_bus_name), "BusName")
    fuzzCheck(((try? InterfaceName(text)) != nil) == FuzzText.valid(text, dbus_validate_interface), "InterfaceName")
    fuzzCheck(((try? MemberName(text)) != nil) == FuzzText.valid(text, dbus_validate_member), "MemberName")
    fuzzCheck(((try? DBusSignature(text)) != nil) == FuzzText.valid(text, dbus_signature_validate), "DBusSignature")

    // Object path algebra.
    if let path = try? ObjectPath(FuzzText.objectPath(&input)) {
        fuzzCheck(path.isDescendant(of: path) && path.isDescendant(of: .root), "isDescendant of itself / root")
        if let parent = path.parent {
            fuzzCheck((try? ObjectPath(parent.rawValue)) != nil, "parent \(parent) of \(path) is invalid")
            fuzzCheck(path.isDescendant(of: parent) && !parent.isDescendant(of: path), "parent relation of \(path)")
        } else {
            fuzzCheck(path == .root, "only / has no parent")
        }
        let element = input.oneIn(4) ? FuzzText.string(&input) : FuzzText.member(&input)
        let isElement = !element.isEmpty && element.utf8.allSatisfy { FuzzText.pathCharacters.contains($0) }
        if let child = try? path.appending(element) {
            // Found here as KNOWN-1 (appending("") to "/" gave "/", "a/b" a grandchild); fixed.
            fuzzCheck(isElement, "\(path).appending(\(element.debugEscaped)) = \(child) should throw")
            fuzzCheck(child.parent == path, "parent of \(child) is not \(path)")
        } else {
            fuzzCheck(!isElement, "\(path).appending(\(element)) threw for a valid element")
        }
        let other = FuzzText.objectPath(&input)
        if let other = try? ObjectPath(other), other.isDescendant(of: path), other != path {
            fuzzCheck(other.rawValue.hasPrefix(path.rawValue == "/" ? "/" : path.rawValue + "/"), "isDescendant")
        }
    }

    // Match rules: rendering never traps, quotes are escaped.
    let rule = DBusMatchRule(
        sender: try? BusName(FuzzText.dottedName(&input)), path: try? ObjectPath(FuzzText.objectPath(&input)),
        interface: try? InterfaceName(FuzzText.dottedName(&input)), member: try? MemberName(FuzzText.member(&input)),
        arg0: FuzzText.string(&input))
    _ = rule.description

    // Factories with validated names; an error reply keeps its name (when valid) and its text.
    let destination = try? BusName(FuzzText.dottedName(&input, unique: input.oneIn(2)))
    let path = (try? ObjectPath(FuzzText.objectPath(&input))) ?? .root
    let interface = try? InterfaceName(FuzzText.dottedName(&input))
    let member = (try? MemberName(FuzzText.member(&input))) ?? "Member"
    guard
        let call = try? DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: member)
    else { fuzzFail("methodCall with valid names failed") }
    fuzzCheck(call.kind == .methodCall && call.path == path && call.member == member, "method call header")
    fuzzCheck(call.interface == interface && call.destination == destination, "method call header")
    dbus_message_set_serial(call.raw, max(1, input.uint32()))
    let name = input.oneIn(2) ? FuzzText.dottedName(&input) : FuzzText.string(&input, allowNUL: true)
    let messageText = FuzzText.string(&input, allowNUL: input.oneIn(2))
    let error = DBusError(name: name, message: messageText)
    guard let reply = DBusMessage.errorReply(to: call, error: error) else { fuzzFail("errorReply returned nil") }
    guard let carried = reply.error else { fuzzFail("an error reply carries no error") }
    let expectedName = FuzzText.valid(name, dbus_validate_error_name) ? name : DBusError.name(for: .failed)
    fuzzCheck(carried.name == expectedName, "error name \(carried.name) != \(expectedName)")
    fuzzCheck(carried.message == messageText.replacingNULs, "error text does not round-trip")
    fuzzCheck(carried.code == DBusError.code(forName: expectedName), "error code")
    fuzzCheck(DBusError.code(forName: DBusError.name(for: carried.code)) == carried.code, "code ↔ name")
    fuzzCheck(reply.replySerial == call.serial, "reply serial")
    if let ret = try? DBusMessage.methodReturn(to: call, arguments: [.string(messageText.replacingNULs)]) {
        fuzzCheck(ret.replySerial == call.serial && ret.error == nil, "method return header")
    } else {
        fuzzFail("methodReturn with a valid string failed")
    }
    if let interface,
        let signal = try? DBusMessage.signal(path: path, interface: interface, member: member, destination: destination)
    {
        fuzzCheck(signal.kind == .signal && signal.isMember(member, of: interface), "signal header")
        fuzzFinishAndCheck(signal)
    }
    fuzzFinishAndCheck(reply)
}
