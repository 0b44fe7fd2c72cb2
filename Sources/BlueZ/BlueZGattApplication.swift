import DBus
import Dispatch
import Locking

/// A local GATT application as bluetoothd wants it: an ObjectManager at the
/// application's root with `GattService1`, `GattCharacteristic1` and
/// `GattDescriptor1` objects below it, registered with
/// `GattManager1.RegisterApplication`. Only bluetoothd (the owner of
/// `org.bluez`) may call the objects; everyone else gets AccessDenied.
package final class BlueZGattApplication: Sendable {
    /// What one service looks like, with the layer above's callbacks.
    package struct Service: Sendable {
        package var uuid: String
        package var isPrimary: Bool
        package var characteristics: [Characteristic]
        /// The services it includes, as indices of services *before* it in the same application:
        /// bluetoothd 5.66 resolves `Includes` only among the services of the application it is
        /// registering, and only against those already inserted (`include_services` in
        /// `src/gatt-database.c`); any other entry is logged ("include service not found") and skipped.
        package var includes: [Int]
        package init(uuid: String, isPrimary: Bool, characteristics: [Characteristic], includes: [Int] = []) {
            self.uuid = uuid
            self.isPrimary = isPrimary
            self.characteristics = characteristics
            self.includes = includes
        }
    }

    package struct Characteristic: Sendable {
        package var uuid: String
        package var flags: BlueZGattFlags
        package var descriptors: [Descriptor]
        /// Called for `ReadValue`; answer through the request.
        package var onRead: @Sendable (BlueZGattRequest) -> Void
        /// Called for `WriteValue` with the value; answer through the request.
        package var onWrite: @Sendable (BlueZGattRequest, [UInt8]) -> Void
        /// Called for `StartNotify` (true) / `StopNotify` (false).
        package var onNotify: @Sendable (Bool) -> Void
        /// When set, the characteristic has `NotifyAcquired` and answers `AcquireNotify` with a
        /// socket per subscribing device, handed to these closures. Offer it only where bluetoothd
        /// has ``BlueZServerFeatures/perDeviceNotifySockets``.
        package var notifySockets: NotifySockets?
        package init(
            uuid: String, flags: BlueZGattFlags, descriptors: [Descriptor],
            onRead: @escaping @Sendable (BlueZGattRequest) -> Void,
            onWrite: @escaping @Sendable (BlueZGattRequest, [UInt8]) -> Void,
            onNotify: @escaping @Sendable (Bool) -> Void,
            notifySockets: NotifySockets? = nil
        ) {
            self.uuid = uuid
            self.flags = flags
            self.descriptors = descriptors
            self.onRead = onRead
            self.onWrite = onWrite
            self.onNotify = onNotify
            self.notifySockets = notifySockets
        }
    }

    package struct Descriptor: Sendable {
        package var uuid: String
        package var flags: BlueZGattFlags
        package var value: [UInt8]
        package init(uuid: String, flags: BlueZGattFlags, value: [UInt8]) {
            self.uuid = uuid
            self.flags = flags
            self.value = value
        }
    }

    /// Identifies one characteristic of this application for `notify`.
    package struct CharacteristicID: Hashable, Sendable {
        let path: ObjectPath
    }

    /// The confirmation callbacks given to `notify`, by characteristic path.
    private final class ConfirmationHandlers: Sendable {
        let handlers = PosixMutex<[ObjectPath: @Sendable () -> Void]>([:])
    }

    let connection: DBusConnection
    let root: ObjectPath
    private let paths: [ObjectPath]
    private let confirmations: ConfirmationHandlers
    /// The characteristic objects, service by service, each in the order of `characteristics`.
    package let characteristicIDs: [CharacteristicID]

    /// Exports `services` on the client's connection (see ``init(connection:services:number:)``).
    package convenience init(client: BlueZClient, services: [Service], number: Int) async throws(BlueZError) {
        try await self.init(connection: client.connection, services: services, number: number)
    }

    /// Exports `service` alone under a fresh root; nothing is registered yet.
    convenience init(connection: DBusConnection, service: Service, number: Int) async throws(BlueZError) {
        try await self.init(connection: connection, services: [service], number: number)
    }

    /// Exports `services` under a fresh root, in this order; nothing is registered yet. When an
    /// export fails, what was exported already is removed again before the error is thrown.
    ///
    /// bluetoothd inserts an application's services into its database in the order of our
    /// `GetManagedObjects` reply, which lists objects in path order: the service paths
    /// (`service0000`, `service0001`, …) are numbered with fixed width so that path order is
    /// the order of `services`. Each service's `Includes` names the paths of the services its
    /// `includes` indices point to (indices that do not point before it are dropped, since
    /// bluetoothd could not resolve them).
    init(connection: DBusConnection, services: [Service], number: Int) async throws(BlueZError) {
        self.connection = connection
        let root: ObjectPath
        do throws(DBusError) { root = try ObjectPath("/org/bluezkit/app\(number)") } catch { throw BlueZError(error) }
        self.root = root
        var paths: [ObjectPath] = []
        var ids: [CharacteristicID] = []
        let confirmations = ConfirmationHandlers()
        self.confirmations = confirmations
        do throws(DBusError) {
            try await connection.addObjectManager(at: root, allowedCaller: BlueZNames.service)
        } catch {
            throw BlueZError(error)
        }
        do throws(DBusError) {
            try await Self.export(services, under: root, on: connection, paths: &paths, ids: &ids, confirmations)
        } catch {
            for path in paths { connection.unexport(path) }
            connection.removeObjectManager(at: root)
            throw BlueZError(error)
        }
        self.paths = paths
        self.characteristicIDs = ids
    }

    /// Exports the objects of `services` under `root`, appending each exported path to `paths`.
    private static func export(
        _ services: [Service], under root: ObjectPath, on connection: DBusConnection, paths: inout [ObjectPath],
        ids: inout [CharacteristicID], _ confirmations: ConfirmationHandlers
    ) async throws(DBusError) {
        var servicePaths: [ObjectPath] = []
        for (s, service) in services.enumerated() {
            let servicePath = try root.appending(Self.serviceName(s))
            servicePaths.append(servicePath)
            for (c, characteristic) in service.characteristics.enumerated() {
                let path = try servicePath.appending("char\(c)")
                ids.append(CharacteristicID(path: path))
                for (d, descriptor) in characteristic.descriptors.enumerated() {
                    let descriptorPath = try path.appending("desc\(d)")
                    try await connection.export(
                        [Self.descriptorInterface(descriptor, characteristic: path)], at: descriptorPath,
                        allowedCaller: BlueZNames.service)
                    paths.append(descriptorPath)
                }
                try await connection.export(
                    [
                        Self.characteristicInterface(
                            characteristic, service: servicePath, path: path, confirmations: confirmations,
                            queue: connection.queue)
                    ],
                    at: path, allowedCaller: BlueZNames.service)
                paths.append(path)
            }
            let includes = service.includes.filter { $0 >= 0 && $0 < s }.map { servicePaths[$0] }
            let serviceInterface = DBusInterface(
                BlueZNames.gattService,
                properties: [
                    DBusProperty("UUID", "s", get: { .string(service.uuid) }),
                    DBusProperty("Primary", "b", get: { .bool(service.isPrimary) }),
                    DBusProperty("Includes", "ao", get: { .objectPathArray(includes) }),
                ])
            try await connection.export([serviceInterface], at: servicePath, allowedCaller: BlueZNames.service)
            paths.append(servicePath)
        }
    }

    /// `service0000`, `service0001`, …: fixed width, so that path order is index order.
    private static func serviceName(_ index: Int) -> String {
        let digits = String(index)
        return "service" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// `GattManager1.RegisterApplication` on `adapter`; bluetoothd reads our tree before it answers.
    package func register(on adapter: BlueZClient.AdapterID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: adapter.path, interface: BlueZNames.gattManager,
                member: "RegisterApplication", arguments: [.objectPath(root), .stringVariantDictionary([:])])
        }
    }

    /// `GattManager1.UnregisterApplication`, then removes the objects.
    package func unregister(from adapter: BlueZClient.AdapterID?) async {
        if let adapter {
            _ = try? await connection.call(
                destination: BlueZNames.service, path: adapter.path, interface: BlueZNames.gattManager,
                member: "UnregisterApplication", arguments: [.objectPath(root)])
        }
        for path in paths { connection.unexport(path) }
        connection.removeObjectManager(at: root)
    }

    /// Sends a new value to subscribers: `PropertiesChanged` on `Value` (bluetoothd
    /// turns it into a notification or indication to every subscribed device), addressed to
    /// bluetoothd's unique name only — as a broadcast signal, any process on the system bus
    /// could read every value with a match rule.
    ///
    /// For every indication a device confirms, bluetoothd calls our `Confirm()` (no
    /// arguments, no reply expected; BlueZ 5.66 also calls it when the indication fails
    /// because the link dropped or timed out). `onConfirm`, when given, is called on the
    /// connection's queue for each of those calls from now on; nil leaves them to a debug log.
    package func notify(_ id: CharacteristicID, value: [UInt8], onConfirm: (@Sendable () -> Void)? = nil) {
        confirmations.handlers.withLock { $0[id.path] = onConfirm }
        connection.emitBytesPropertyChanged(
            path: id.path, interface: BlueZNames.gattCharacteristic, property: "Value", value: value,
            toOwnerOf: BlueZNames.service)
    }

    // MARK: Interfaces

    private static func characteristicInterface(
        _ characteristic: Characteristic, service: ObjectPath, path: ObjectPath, confirmations: ConfirmationHandlers,
        queue: DispatchQueue
    ) -> DBusInterface {
        let indicates = !characteristic.flags.isDisjoint(with: .indicating)
        var properties = [
            DBusProperty("UUID", "s", get: { .string(characteristic.uuid) }),
            DBusProperty("Service", "o", get: { .objectPath(service) }),
            DBusProperty("Flags", "as", get: { .stringArray(characteristic.flags.exportedNames) }),
        ]
        var methods: [DBusMethod] = []
        if let sockets = characteristic.notifySockets {
            // bluetoothd checks only that the property exists (`ccc_write_cb`); the sockets are per device.
            properties.append(DBusProperty("NotifyAcquired", "b", get: { .bool(false) }))
            methods.append(acquireNotifyMethod(sockets, queue: queue))
        }
        return DBusInterface(
            BlueZNames.gattCharacteristic,
            methods: methods + [
                DBusMethod("ReadValue", in: "a{sv}", out: "ay") { invocation in
                    guard let request = BlueZGattRequest(invocation) else { return }
                    characteristic.onRead(request)
                },
                DBusMethod("WriteValue", in: "aya{sv}") { invocation in
                    guard let request = BlueZGattRequest(invocation),
                        let value = (try? invocation.arguments())?.first?.bytesValue
                    else { return }
                    characteristic.onWrite(request, value)
                },
                DBusMethod("StartNotify") { invocation in
                    characteristic.onNotify(true)
                    invocation.reply()
                },
                DBusMethod("StopNotify") { invocation in
                    characteristic.onNotify(false)
                    invocation.reply()
                },
                DBusMethod("Confirm") { invocation in
                    // bluetoothd wants no reply (then none goes out); a caller that waits for one gets it empty.
                    invocation.reply()
                    guard indicates else {
                        return DBusLog.debug("Confirm on \(path), which does not indicate: ignored")
                    }
                    guard let handler = confirmations.handlers.withLock({ $0[path] }) else {
                        return DBusLog.debug("Confirm on \(path), which sent no indication: ignored")
                    }
                    handler()
                },
            ],
            properties: properties)
    }

    private static func descriptorInterface(_ descriptor: Descriptor, characteristic: ObjectPath) -> DBusInterface {
        DBusInterface(
            BlueZNames.gattDescriptor,
            methods: [
                DBusMethod("ReadValue", in: "a{sv}", out: "ay") { invocation in
                    guard let request = BlueZGattRequest(invocation) else { return }
                    request.respond(Array(descriptor.value.dropFirst(Int(request.offset))))
                }
            ],
            properties: [
                DBusProperty("UUID", "s", get: { .string(descriptor.uuid) }),
                DBusProperty("Characteristic", "o", get: { .objectPath(characteristic) }),
                DBusProperty("Flags", "as", get: { .stringArray(descriptor.flags.exportedNames) }),
            ])
    }
}
