import DBus
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny GATT application on its own bus connection, as a program using BlueZ's peripheral role exports it:
/// an object manager at `root` and `GattService1` / `GattCharacteristic1` / `GattDescriptor1` objects below.
///
/// Characteristics answer `ReadValue` with their value (or `readError`), store `WriteValue`s, and
/// record every call with its options.
final class TestGATTApplication: Sendable {
    /// One exported object.
    struct Object: Sendable {
        var path: String
        var interface: String
        var properties: [String: DBusValue]
    }

    /// One call bluetoothd made on the application.
    struct Call: Sendable, Equatable {
        var member: String
        var path: String
        var options: [String: DBusValue]
        var value: [UInt8]?
    }

    struct State: Sendable {
        var values: [String: [UInt8]] = [:]
        var calls: [Call] = []
        var readError: DBusError?
        var writeError: DBusError?
        /// Our ends of the sockets handed out with `AcquireNotify`, by characteristic path.
        var notifySockets: [String: Int32] = [:]
    }

    /// The state behind a lock, in a class so handlers can share it.
    final class Store: Sendable {
        private let mutex = PosixMutex(State())
        func withLock<R: Sendable>(_ body: (inout State) -> R) -> R { mutex.withLock { body(&$0) } }
    }

    let connection: DBusConnection
    let root: String
    let state = Store()

    init(address: String, root: String = "/app", objects: [Object]) async throws {
        connection = try await DBusConnection.open(address: address, label: "test.gatt-app")
        self.root = root
        try await connection.addObjectManager(at: ObjectPath(root))
        for object in objects {
            try await export(object)
        }
    }

    /// A service, a characteristic with `flags` and a descriptor: `/app/service0`, `…/char0`, `…/desc0`.
    static func standard(address: String, flags: [String] = ["read", "write", "notify", "write-without-response"])
        async throws -> TestGATTApplication
    {
        try await TestGATTApplication(
            address: address,
            objects: [
                service("/app/service0", uuid: "180D"),
                characteristic("/app/service0/char0", uuid: "2A37", service: "/app/service0", flags: flags),
                descriptor("/app/service0/char0/desc0", uuid: "2901", characteristic: "/app/service0/char0"),
            ])
    }

    static func service(_ path: String, uuid: String, primary: Bool = true) -> Object {
        Object(
            path: path, interface: "org.bluez.GattService1",
            properties: ["UUID": .string(uuid), "Primary": .bool(primary)])
    }

    static func characteristic(_ path: String, uuid: String, service: String, flags: [String]) -> Object {
        Object(
            path: path, interface: "org.bluez.GattCharacteristic1",
            properties: [
                "UUID": .string(uuid), "Service": .objectPath(try! ObjectPath(service)), "Flags": .stringArray(flags),
            ])
    }

    static func descriptor(_ path: String, uuid: String, characteristic: String, flags: [String] = ["read"]) -> Object {
        Object(
            path: path, interface: "org.bluez.GattDescriptor1",
            properties: [
                "UUID": .string(uuid), "Characteristic": .objectPath(try! ObjectPath(characteristic)),
                "Flags": .stringArray(flags),
            ])
    }

    var calls: [Call] { state.withLock { $0.calls } }

    /// `PropertiesChanged` of the characteristic's `Value`, as an application notifies.
    func notify(_ path: String, _ value: [UInt8]) throws {
        state.withLock { $0.values[path] = value }
        connection.emitPropertiesChanged(
            path: try ObjectPath(path), interface: "org.bluez.GattCharacteristic1", changed: ["Value": .bytes(value)])
    }

    /// Writes `value` as one datagram to the socket handed out for `path` with `AcquireNotify`.
    func notifyThroughSocket(_ path: String, _ value: [UInt8]) -> Bool {
        guard let fd = state.withLock({ $0.notifySockets[path] }) else { return false }
        return value.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == value.count
    }

    /// Whether bluetoothd closed its end of the socket of `path` (a read sees the end of the stream).
    func notifySocketClosed(_ path: String) -> Bool {
        guard let fd = state.withLock({ $0.notifySockets[path] }) else { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0 && entry.revents & Int16(POLLHUP) != 0
    }

    /// `RegisterApplication` from the application's own connection (bluetoothd reads the caller's tree).
    func register(adapter: String = "/org/bluez/hci0") async throws {
        _ = try await connection.call(
            destination: "org.bluez", path: ObjectPath(adapter), interface: "org.bluez.GattManager1",
            member: "RegisterApplication",
            arguments: [.objectPath(try ObjectPath(root)), .stringVariantDictionary([:])])
    }

    /// `RegisterApplication` from the application's connection; its error reply, or nil when it succeeded.
    func registrationError(adapter: String = "/org/bluez/hci0", member: String = "RegisterApplication") async
        -> DBusError?
    {
        do {
            _ = try await connection.call(
                destination: "org.bluez", path: ObjectPath(adapter), interface: "org.bluez.GattManager1",
                member: MemberName(member),
                arguments: [.objectPath(try ObjectPath(root))]
                    + (member == "RegisterApplication" ? [.stringVariantDictionary([:])] : []))
            return nil
        } catch {
            return error
        }
    }

    func close() { connection.close() }

    private func export(_ object: Object) async throws {
        let path = object.path
        let properties = object.properties
        var exported = properties.keys.sorted().map { name in
            DBusProperty(name, properties[name]!.signature, get: { properties[name] })
        }
        var methods: [DBusMethod] = []
        if object.interface == "org.bluez.GattCharacteristic1" {
            let state = self.state
            exported.append(DBusProperty("Value", "ay", get: { .bytes(state.withLock { $0.values[path] ?? [] }) }))
            methods = [
                DBusMethod("ReadValue", in: "a{sv}", out: "ay") { invocation in
                    let options = Self.options(invocation, at: 0)
                    let (value, error) = state.withLock { state in
                        state.calls.append(Call(member: "ReadValue", path: path, options: options))
                        return (state.values[path] ?? [], state.readError)
                    }
                    if let error { return invocation.reply(error: error) }
                    invocation.reply([.bytes(value)])
                },
                DBusMethod("WriteValue", in: "aya{sv}") { invocation in
                    let value = (try? invocation.arguments())?.first?.bytesValue ?? []
                    let options = Self.options(invocation, at: 1)
                    let error = state.withLock { state in
                        state.calls.append(Call(member: "WriteValue", path: path, options: options, value: value))
                        if state.writeError == nil { state.values[path] = value }
                        return state.writeError
                    }
                    if let error { return invocation.reply(error: error) }
                    invocation.reply()
                },
                DBusMethod("StartNotify") { invocation in
                    state.withLock { $0.calls.append(Call(member: "StartNotify", path: path, options: [:])) }
                    invocation.reply()
                },
                DBusMethod("StopNotify") { invocation in
                    state.withLock { $0.calls.append(Call(member: "StopNotify", path: path, options: [:])) }
                    invocation.reply()
                },
                DBusMethod("AcquireNotify", in: "a{sv}", out: "hq") { invocation in
                    let options = Self.options(invocation, at: 0)
                    var fds: [Int32] = [0, 0]
                    guard
                        socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0
                    else {
                        return invocation.reply(error: DBusError(name: "org.bluez.Error.Failed", message: "socketpair"))
                    }
                    state.withLock { state in
                        state.calls.append(Call(member: "AcquireNotify", path: path, options: options))
                        state.notifySockets[path] = fds[0]
                    }
                    let mtu = options["mtu"]?.uint16Value ?? 23
                    invocation.reply([.unixFD(UnixFileDescriptor(owning: fds[1])), .uint16(mtu)])
                },
            ]
        }
        try await connection.export(
            [DBusInterface(InterfaceName(object.interface), methods: methods, properties: exported)],
            at: ObjectPath(path))
    }

    private static func options(_ invocation: DBusMethodInvocation, at index: Int) -> [String: DBusValue] {
        guard let arguments = try? invocation.arguments(), arguments.count > index else { return [:] }
        return (arguments[index].stringKeyedDictionary ?? [:]).mapValues(\.unwrappingVariants)
    }
}
