internal import CDBus

extension DBusConnection {
    /// What `RequestName` answered.
    package enum RequestNameReply: UInt32, Sendable {
        case primaryOwner = 1
        case inQueue = 2
        case exists = 3
        case alreadyOwner = 4
    }

    /// Options of `RequestName`.
    package struct RequestNameFlags: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        package static let allowReplacement = RequestNameFlags(rawValue: 0x1)
        package static let replaceExisting = RequestNameFlags(rawValue: 0x2)
        package static let doNotQueue = RequestNameFlags(rawValue: 0x4)
    }

    /// Registers with the bus (`Hello`) asynchronously and records our unique name.
    func hello() async throws(DBusError) {
        let reply = try await call(destination: .bus, path: Self.busPath, interface: .bus, member: "Hello")
        guard let name = reply.first?.stringValue, let unique = try? BusName(name) else {
            throw DBusError(.failed, "the bus answered Hello without a unique name")
        }
        onQueue { setUniqueName(unique) }
    }

    /// Asks the bus for a well-known name (`RequestName`).
    package func requestName(_ name: BusName, flags: RequestNameFlags = [.doNotQueue]) async throws(DBusError)
        -> RequestNameReply
    {
        let reply = try await call(
            destination: .bus, path: Self.busPath, interface: .bus, member: "RequestName",
            arguments: [.string(name.rawValue), .uint32(flags.rawValue)])
        guard let code = reply.first?.uint32Value, let result = RequestNameReply(rawValue: code) else {
            throw DBusError(.failed, "unexpected RequestName reply \(reply)")
        }
        // Asked for again after a reconnection (the bus forgets a connection's names with it).
        if result != .exists { onQueue { ownedNames[name] = flags } }
        return result
    }

    /// Gives a well-known name back (`ReleaseName`); true when we owned it.
    @discardableResult
    package func releaseName(_ name: BusName) async throws(DBusError) -> Bool {
        let reply = try await call(
            destination: .bus, path: Self.busPath, interface: .bus, member: "ReleaseName",
            arguments: [.string(name.rawValue)])
        onQueue { _ = ownedNames.removeValue(forKey: name) }
        return reply.first?.uint32Value == 1
    }
}
