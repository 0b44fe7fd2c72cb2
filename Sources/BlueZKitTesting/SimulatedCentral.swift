internal import DBus
import Synchronization

/// A virtual remote device connected to a simulated adapter as a central: it reads, writes and
/// subscribes to the characteristics of the GATT applications registered on that adapter, and the
/// simulated bluetoothd turns each ATT request into the D-Bus call bluetoothd 5.66 makes on the
/// application (`src/gatt-database.c`).
///
/// Create one with ``SimulatedBlueZ/addCentral(address:to:mtu:)``. The options of every call are
/// those bluetoothd fills in: `device` (``devicePath``), `offset` (only when not zero), `link`
/// (`"LE"`) and `mtu`. Errors the application replies with become ``SimulatedATTError``s as in
/// bluetoothd's `dbus_error_to_att_ecode`.
///
/// While connected, bluetoothd keeps a `Device1` for the central at ``devicePath`` with
/// `Connected` true (powering the adapter off or a `Device1.Disconnect` drops the link). A
/// disconnected central's operations throw ``SimulatedATTError/unlikelyError``.
///
/// Differences from bluetoothd: the central's own GATT database is not browsed (its `Device1` never
/// resolves services); security flags
/// (`encrypt-read`, `secure-write`, …) allow the operation as their plain forms do; a write command
/// waits for the application to handle it (its errors are still dropped, as a write command has no
/// response).
public final class SimulatedCentral: Sendable {
    private static let characteristicInterface: InterfaceName = "org.bluez.GattCharacteristic1"
    private static let readFlags: Set<String> = [
        "read", "encrypt-read", "encrypt-authenticated-read", "secure-read",
    ]
    private static let writeFlags: Set<String> = [
        "write", "encrypt-write", "encrypt-authenticated-write", "secure-write", "reliable-write",
    ]
    private static let notifyFlags: Set<String> = [
        "notify", "indicate", "encrypt-notify", "encrypt-authenticated-notify", "secure-notify", "encrypt-indicate",
        "encrypt-authenticated-indicate", "secure-indicate",
    ]

    private struct Subscription: Sendable {
        let signals: DBusSubscription
        /// Ends the stream when the application leaves the bus.
        let owner: DBusSubscription
        let continuation: AsyncStream<[UInt8]>.Continuation
        let target: SimulatorCore.CentralTarget
    }

    /// The central's Bluetooth address, upper case.
    public let address: String
    /// The adapter the central is connected to.
    public let adapter: SimulatedAdapter
    /// The ATT MTU of the link, passed to the application as the `mtu` option.
    public let mtu: UInt16
    private let coreReference: Mutex<SimulatedAdapter.WeakCore>
    private let subscriptions = Mutex<[String: Subscription]>([:])

    init(address: String, adapter: SimulatedAdapter, mtu: UInt16, core: SimulatorCore) {
        self.address = address
        self.adapter = adapter
        self.mtu = mtu
        self.coreReference = Mutex(.init(core: core))
    }

    deinit {
        for subscription in subscriptions.withLock({ Array($0.values) }) {
            subscription.signals.cancel()
            subscription.owner.cancel()
            subscription.continuation.finish()
        }
    }

    /// Connects the central again after ``disconnect()`` or a dropped link (its `Device1` shows `Connected`).
    ///
    /// - Returns: false when the adapter is absent or powered off.
    @discardableResult
    public func connect() -> Bool {
        core?.centralConnected(adapter: adapter.name, address: address, mtu: mtu) ?? false
    }

    /// Drops the link from the central's side: its `Device1` turns `Connected` false, and its
    /// subscriptions end as bluetoothd ends those of a central that is not bonded
    /// (`att_disconnected` → `clear_ccc_state`): each one counts one subscriber fewer, and
    /// the application gets `StopNotify` when that was the last. Returns once those calls
    /// were handled.
    public func disconnect() async {
        core?.centralDisconnected(adapter: adapter.name, address: address)
        let ended = subscriptions.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for subscription in ended {
            subscription.signals.cancel()
            subscription.owner.cancel()
            subscription.continuation.finish()
            guard core?.changeNotifyCount(subscription.target.key, by: -1) == 0 else { continue }
            _ = try? await subscription.target.connection.call(
                destination: subscription.target.owner, path: subscription.target.path,
                interface: Self.characteristicInterface, member: "StopNotify")
        }
    }

    /// Whether the central is connected to its adapter.
    public var isConnected: Bool { core?.isCentralConnected(adapter: adapter.name, address: address) ?? false }

    /// The `device` option: the `Device1` path bluetoothd uses for this central, under its adapter.
    public var devicePath: String { SimulatorCore.devicePath(adapter: adapter.name, address: address).rawValue }

    /// Reads the characteristic from `offset`, as an ATT Read (Blob) Request: the application's `ReadValue`.
    ///
    /// - Throws: ``SimulatedATTError/invalidHandle`` when no registered application has the
    ///   characteristic (``SimulatedATTError/unlikelyError`` when the central is not connected),
    ///   ``SimulatedATTError/readNotPermitted`` when its flags do not allow reads,
    ///   else the application's error mapped as bluetoothd maps it (``SimulatedATTError/unlikelyError``
    ///   for a reply that is not `ay`).
    public func read(serviceUUID: String, characteristicUUID: String, offset: UInt16 = 0)
        async throws(SimulatedATTError) -> [UInt8]
    {
        let target = try target(serviceUUID, characteristicUUID)
        guard target.has(anyOf: Self.readFlags) else { throw .readNotPermitted }
        let reply: [DBusValue]
        do {
            reply = try await target.connection.call(
                destination: target.owner, path: target.path, interface: Self.characteristicInterface,
                member: "ReadValue", arguments: [options(offset: offset)])
        } catch {
            throw SimulatedATTError(code: SimulatorCore.attCode(for: error, permissionError: 0x02))
        }
        guard reply.count == 1, case .bytes(let value) = reply[0] else { throw .unlikelyError }
        return value
    }

    /// Writes `value` at `offset`, as an ATT Write Request (`.request`) or Write Command (`.command`):
    /// the application's `WriteValue`.
    ///
    /// - Throws: ``SimulatedATTError/invalidHandle`` when no registered application has the
    ///   characteristic, ``SimulatedATTError/writeNotPermitted`` when its flags do not allow this
    ///   kind of write, else (requests only) the application's error mapped as bluetoothd maps it.
    public func write(
        serviceUUID: String, characteristicUUID: String, value: [UInt8], offset: UInt16 = 0,
        type: SimulatedWriteRequest.Kind = .request
    ) async throws(SimulatedATTError) {
        let target = try target(serviceUUID, characteristicUUID)
        let allowed = type == .command ? ["write-without-response"] : Self.writeFlags
        guard target.has(anyOf: allowed) else { throw .writeNotPermitted }
        do {
            _ = try await target.connection.call(
                destination: target.owner, path: target.path, interface: Self.characteristicInterface,
                member: "WriteValue", arguments: [.bytes(value), options(offset: offset)])
        } catch {
            guard type != .command else { return }
            throw SimulatedATTError(code: SimulatorCore.attCode(for: error, permissionError: 0x03))
        }
    }

    /// Enables notifications (writes the characteristic's CCC): bluetoothd calls the application's
    /// `StartNotify`, and every `PropertiesChanged` of its `Value` arrives on the returned stream,
    /// which finishes when the application leaves the bus.
    ///
    /// Returns once the application handled `StartNotify` (whose errors bluetoothd ignores).
    /// Subscribing again replaces (and finishes) the previous stream, without another `StartNotify`.
    ///
    /// - Throws: ``SimulatedATTError/invalidHandle`` when no registered application has the
    ///   characteristic; error `0xFD` (CCC improperly configured) when it cannot notify or indicate.
    public func subscribe(serviceUUID: String, characteristicUUID: String) async throws(SimulatedATTError)
        -> AsyncStream<[UInt8]>
    {
        let target = try target(serviceUUID, characteristicUUID)
        guard target.has(anyOf: Self.notifyFlags) else { throw SimulatedATTError(code: 0xFD) }
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream()
        let rule = DBusMatchRule(
            sender: target.owner, path: target.path, interface: .properties, member: "PropertiesChanged")
        let signals: DBusSubscription
        let owner: DBusSubscription
        do {
            signals = try await target.connection.subscribe(rule) { message in
                guard let change = message.propertiesChange(),
                    change.interface == Self.characteristicInterface.rawValue,
                    let value = change.changed["Value"]?.bytesValue
                else { return }
                continuation.yield(value)
            }
            owner = try await target.connection.watchNameOwner(target.owner) { current in
                if current == nil { continuation.finish() }
            }
        } catch {
            throw .unlikelyError
        }
        let subscription = Subscription(signals: signals, owner: owner, continuation: continuation, target: target)
        let previous = subscriptions.withLock { $0.updateValue(subscription, forKey: target.key) }
        if let previous {
            // The CCC already holds this value: bluetoothd does not call StartNotify again.
            previous.signals.cancel()
            previous.owner.cancel()
            previous.continuation.finish()
            return stream
        }
        _ = core?.changeNotifyCount(target.key, by: 1)
        _ = try? await target.connection.call(
            destination: target.owner, path: target.path, interface: Self.characteristicInterface, member: "StartNotify"
        )
        return stream
    }

    /// Disables notifications: the stream finishes, and when no other central is subscribed bluetoothd
    /// calls the application's `StopNotify` (best effort; this returns once it was handled).
    public func unsubscribe(serviceUUID: String, characteristicUUID: String) async throws(SimulatedATTError) {
        let target = try target(serviceUUID, characteristicUUID)
        guard let subscription = subscriptions.withLock({ $0.removeValue(forKey: target.key) }) else { return }
        subscription.signals.cancel()
        subscription.owner.cancel()
        subscription.continuation.finish()
        guard core?.changeNotifyCount(target.key, by: -1) == 0 else { return }
        _ = try? await target.connection.call(
            destination: target.owner, path: target.path, interface: Self.characteristicInterface, member: "StopNotify")
    }

    // MARK: Helpers

    private var core: SimulatorCore? { coreReference.withLock { $0.core } }

    private func target(_ serviceUUID: String, _ characteristicUUID: String) throws(SimulatedATTError)
        -> SimulatorCore.CentralTarget
    {
        guard isConnected else { throw .unlikelyError }
        guard
            let target = core?.centralTarget(
                adapter: adapter.name, serviceUUID: serviceUUID, characteristicUUID: characteristicUUID)
        else { throw .invalidHandle }
        return target
    }

    /// `append_options`: device, offset (when not zero), link, mtu.
    private func options(offset: UInt16) -> DBusValue {
        var values: [String: DBusValue] = [
            "device": .objectPath(SimulatorCore.devicePath(adapter: adapter.name, address: address)),
            "link": .string("LE"),
            "mtu": .uint16(mtu),
        ]
        if offset != 0 { values["offset"] = .uint16(offset) }
        return .stringVariantDictionary(values)
    }
}
