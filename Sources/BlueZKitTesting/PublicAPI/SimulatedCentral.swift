internal import DBus
import Locking

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
/// A central subscribed for indications confirms each value it receives, and bluetoothd calls
/// the application's `Confirm()` for it (no arguments, no reply awaited). Set
/// ``confirmsIndications`` to false to hold the confirmations back until
/// ``confirmHeldIndications()``. As bluetoothd 5.66 does (`disc_att_send_op` → `conf_cb`), an
/// indication still unconfirmed when the central's link drops gets its `Confirm()` all the same.
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
    private static let notificationFlags: Set<String> = [
        "notify", "encrypt-notify", "encrypt-authenticated-notify", "secure-notify",
    ]
    private static let indicationFlags: Set<String> = [
        "indicate", "encrypt-indicate", "encrypt-authenticated-indicate", "secure-indicate",
    ]

    private struct Subscription: Sendable {
        let signals: DBusSubscription
        /// Ends the stream when the application leaves the bus.
        let owner: DBusSubscription
        let continuation: AsyncStream<[UInt8]>.Continuation
        let target: SimulatorCore.CentralTarget
    }

    /// Whether indications are confirmed as they arrive, and those held back.
    private struct Confirmations: Sendable {
        var automatic = true
        /// How each held indication is confirmed (`Confirm()`, or a byte on the central's socket).
        var held: [@Sendable () -> Void] = []
    }

    /// The central's Bluetooth address, upper case.
    public let address: String
    /// The adapter the central is connected to.
    public let adapter: SimulatedAdapter
    /// The ATT MTU of the link, passed to the application as the `mtu` option.
    public let mtu: UInt16
    private let coreReference: PosixMutex<SimulatedAdapter.WeakCore>
    private let subscriptions = PosixMutex<[String: Subscription]>([:])
    /// A bonded central's subscriptions whose CCC bluetoothd kept across a dropped link, by target key.
    private let keptConfigurations = PosixMutex<[String: SimulatorCore.CentralTarget]>([:])
    private let confirmations = PosixMutex(Confirmations())

    init(address: String, adapter: SimulatedAdapter, mtu: UInt16, core: SimulatorCore) {
        self.address = address
        self.adapter = adapter
        self.mtu = mtu
        self.coreReference = PosixMutex(.init(core: core))
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
    /// subscriptions' streams finish. For a central that is not bonded, its subscriptions end
    /// as bluetoothd ends them (`att_disconnected` → `clear_ccc_state`): each one counts one
    /// subscriber fewer, and the application gets `StopNotify` when that was the last. A bonded
    /// central (``bond()``) keeps its CCC values, as bluetoothd keeps them (`att_disconnected`
    /// returns early for a paired device): the application is not told, and still counts it as
    /// a subscriber; only its own socket (5.82) closes with the link. Returns once those calls
    /// were handled.
    public func disconnect() async {
        let bonded = isBonded
        core?.centralDisconnected(adapter: adapter.name, address: address)
        // The link's unconfirmed indications fail, and bluetoothd calls Confirm() for them anyway.
        confirmHeldIndications()
        let ended = subscriptions.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for subscription in ended {
            subscription.signals.cancel()
            subscription.owner.cancel()
            subscription.continuation.finish()
            if bonded {
                keep(subscription.target)
            } else {
                await leave(subscription.target)
            }
        }
    }

    /// Pairs and bonds the central with its adapter, as a completed pairing does: its `Device1`
    /// turns `Paired` and `Bonded` true, and bluetoothd stores the bond. From then on it keeps
    /// its subscriptions across links (see ``disconnect()``), and subscribing again after its
    /// link came back writes the value its CCC holds already: bluetoothd calls neither
    /// `StartNotify` nor `AcquireNotify` for it (`gatt_ccc_write_cb`), so on 5.82 values reach it
    /// only as `PropertiesChanged`.
    ///
    /// - Returns: false when the central has no `Device1` on its adapter (the adapter is gone).
    @discardableResult
    public func bond() -> Bool {
        core?.bondCentral(adapter: adapter.name, address: address) ?? false
    }

    /// Whether the central is bonded with its adapter (its `Device1` shows `Bonded`).
    public var isBonded: Bool { core?.isCentralBonded(adapter: adapter.name, address: address) ?? false }

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
    /// With `prepareAuthorize`, this is bluetoothd asking whether a Prepare Write may be queued
    /// (option `prepare-authorize`, sent for characteristics flagged `authorize` to untrusted
    /// devices); the value reaches the application again when the writes are executed.
    ///
    /// - Throws: ``SimulatedATTError/invalidHandle`` when no registered application has the
    ///   characteristic, ``SimulatedATTError/writeNotPermitted`` when its flags do not allow this
    ///   kind of write, else (requests only) the application's error mapped as bluetoothd maps it.
    public func write(
        serviceUUID: String, characteristicUUID: String, value: [UInt8], offset: UInt16 = 0,
        type: SimulatedWriteRequest.Kind = .request, prepareAuthorize: Bool = false
    ) async throws(SimulatedATTError) {
        let target = try target(serviceUUID, characteristicUUID)
        let allowed = type == .command ? ["write-without-response"] : Self.writeFlags
        guard target.has(anyOf: allowed) else { throw .writeNotPermitted }
        let options = options(offset: offset, prepareAuthorize: prepareAuthorize)
        do {
            _ = try await target.connection.call(
                destination: target.owner, path: target.path, interface: Self.characteristicInterface,
                member: "WriteValue", arguments: [.bytes(value), options])
        } catch {
            guard type != .command else { return }
            throw SimulatedATTError(code: SimulatorCore.attCode(for: error, permissionError: 0x03))
        }
    }

    /// Enables notifications or indications (writes 1 or 2 to the characteristic's CCC): for the
    /// first central, bluetoothd calls the application's `AcquireNotify` when the characteristic
    /// has `NotifyAcquired` (then each datagram the application writes to the socket reaches
    /// every subscribed central), else `StartNotify`; as 5.82 (``SimulatedBlueZ/Version/bluez5_82``),
    /// every central gets its own `AcquireNotify` socket, whose datagrams reach it alone; every `PropertiesChanged` of its `Value`
    /// arrives too, on the returned stream, which finishes when the application leaves the bus.
    /// Each value received as an indication is confirmed (see ``confirmsIndications``).
    ///
    /// Returns once the application handled `AcquireNotify` or `StartNotify` (bluetoothd ignores
    /// `StartNotify`'s errors and falls back from `AcquireNotify`'s to it, but for `Failed`).
    /// Subscribing again replaces (and finishes) the previous stream, without another `StartNotify`.
    ///
    /// - Parameter indications: true for indications, false for notifications; nil (the default)
    ///   for what Core Bluetooth's `setNotifyValue` asks: notifications when the characteristic
    ///   can notify, else indications.
    /// - Throws: ``SimulatedATTError/invalidHandle`` when no registered application has the
    ///   characteristic; error `0xFD` (CCC improperly configured) when it cannot deliver values
    ///   the way asked (`ccc_write_cb`).
    public func subscribe(serviceUUID: String, characteristicUUID: String, indications: Bool? = nil)
        async throws(SimulatedATTError) -> AsyncStream<[UInt8]>
    {
        let target = try target(serviceUUID, characteristicUUID)
        let indicates = indications ?? !target.has(anyOf: Self.notificationFlags)
        guard target.has(anyOf: indicates ? Self.indicationFlags : Self.notificationFlags) else {
            throw SimulatedATTError(code: 0xFD)
        }
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream()
        let rule = DBusMatchRule(
            sender: target.owner, path: target.path, interface: .properties, member: "PropertiesChanged")
        let signals: DBusSubscription
        let owner: DBusSubscription
        do {
            signals = try await target.connection.subscribe(rule) { [weak self] message in
                guard let change = message.propertiesChange(),
                    change.interface == Self.characteristicInterface.rawValue,
                    let value = change.changed["Value"]?.bytesValue
                else { return }
                // The central's stack confirms before its app sees the value.
                if indicates { self?.indicationReceived(target) }
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
        if keptConfigurations.withLock({ $0.removeValue(forKey: target.key) }) != nil {
            // Bonded and back: the CCC kept its value, so this write changes nothing for bluetoothd.
            // Values come as `PropertiesChanged`, and through the application's one socket (5.66).
            core?.setApplicationNotifyHandler(target.key, address: address) { [weak self] value in
                if indicates { self?.indicationReceived(target) }
                continuation.yield(value)
            }
            return stream
        }
        if hasDeviceSockets(target) {
            // 5.82: a socket for this central alone, confirmations written back to it.
            let deviceKey = SimulatorCore.deviceSocketKey(target.key, address: address)
            core?.setApplicationNotifyHandler(deviceKey, address: address) { [weak self] value in
                if indicates { self?.indicationReceived { [weak self] in self?.core?.writeConfirmation(deviceKey) } }
                continuation.yield(value)
            }
            _ = core?.changeNotifyCount(target.key, by: 1)
            if await acquireNotify(target, socketKey: deviceKey) { return stream }
            core?.setApplicationNotifyHandler(deviceKey, address: address, nil)
            _ = try? await target.connection.call(
                destination: target.owner, path: target.path, interface: Self.characteristicInterface,
                member: "StartNotify")
            return stream
        }
        core?.setApplicationNotifyHandler(target.key, address: address) { [weak self] value in
            if indicates { self?.indicationReceived(target) }
            continuation.yield(value)
        }
        // `ccc_write_cb`: with a socket open, one more subscriber only counts; without, the first
        // one asks for a socket when the characteristic offers it, and otherwise every one gets
        // `StartNotify`.
        let count = core?.changeNotifyCount(target.key, by: 1) ?? 0
        if core?.hasApplicationNotifySocket(target.key) == true { return stream }
        if count == 1, target.characteristic.offersAcquireNotify, await acquireNotify(target, socketKey: target.key) {
            return stream
        }
        _ = try? await target.connection.call(
            destination: target.owner, path: target.path, interface: Self.characteristicInterface, member: "StartNotify"
        )
        return stream
    }

    /// `AcquireNotify` with this central's options (`acquire_notify_setup`); true when the values
    /// come through a socket now, or when bluetoothd gives up (`Failed` or no reply); false when
    /// it falls back to `StartNotify` (any other error, or a malformed reply: `acquire_notify_reply`).
    private func acquireNotify(_ target: SimulatorCore.CentralTarget, socketKey: String) async -> Bool {
        do {
            let reply = try await target.connection.call(
                destination: target.owner, path: target.path, interface: Self.characteristicInterface,
                member: "AcquireNotify", arguments: [options(offset: 0)])
            guard reply.count == 2, let descriptor = reply[0].unixFDValue, reply[1].uint16Value != nil else {
                return false
            }
            _ = core?.openApplicationNotifySocket(socketKey, descriptor: descriptor)
            return true
        } catch {
            return error.name == "org.bluez.Error.Failed" || error.code == .noReply || error.code == .timeout
        }
    }

    /// Disables notifications: the stream finishes, and when no other central is subscribed bluetoothd
    /// calls the application's `StopNotify` (best effort; this returns once it was handled).
    public func unsubscribe(serviceUUID: String, characteristicUUID: String) async throws(SimulatedATTError) {
        let target = try target(serviceUUID, characteristicUUID)
        if let kept = keptConfigurations.withLock({ $0.removeValue(forKey: target.key) }) {
            return await leave(kept)
        }
        guard let subscription = subscriptions.withLock({ $0.removeValue(forKey: target.key) }) else { return }
        subscription.signals.cancel()
        subscription.owner.cancel()
        subscription.continuation.finish()
        // With a socket, closing it is the whole of unsubscribing (`io_destroy(chrc->notify_io)`).
        await leave(subscription.target)
    }

    // MARK: Indication confirmations

    /// Whether the central confirms each indication as soon as it arrives (true, the default), as
    /// centrals do. False holds the confirmations back (``heldConfirmations``) until
    /// ``confirmHeldIndications()``, so a test can watch the application wait for them; setting
    /// it to true again does not send those held.
    public var confirmsIndications: Bool {
        get { confirmations.withLock { $0.automatic } }
        set { confirmations.withLock { $0.automatic = newValue } }
    }

    /// The number of indications received and not confirmed yet.
    public var heldConfirmations: Int { confirmations.withLock { $0.held.count } }

    /// Confirms the indications held back, in the order they arrived: bluetoothd calls the
    /// application's `Confirm()` once for each, without waiting for replies.
    public func confirmHeldIndications() {
        let held = confirmations.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        for confirm in held { confirm() }
    }

    /// An indication arrived: confirm it now or hold it back.
    private func indicationReceived(_ target: SimulatorCore.CentralTarget) {
        indicationReceived { target.confirm() }
    }

    /// An indication arrived: confirm it now or hold back `confirm`.
    private func indicationReceived(confirm: @escaping @Sendable () -> Void) {
        let automatic = confirmations.withLock { state in
            if !state.automatic { state.held.append(confirm) }
            return state.automatic
        }
        if automatic { confirm() }
    }

    /// Whether bluetoothd gives each central a socket of its own for `target` (5.82 and later).
    private func hasDeviceSockets(_ target: SimulatorCore.CentralTarget) -> Bool {
        (core?.options.version ?? .bluez5_66) >= .bluez5_82 && target.characteristic.offersAcquireNotify
    }

    /// A bonded central's link dropped while it was subscribed to `target`: bluetoothd keeps the
    /// CCC value and the subscriber count; the central's own socket (5.82) closes with the link.
    private func keep(_ target: SimulatorCore.CentralTarget) {
        core?.setApplicationNotifyHandler(target.key, address: address, nil)
        let deviceKey = SimulatorCore.deviceSocketKey(target.key, address: address)
        core?.setApplicationNotifyHandler(deviceKey, address: address, nil)
        core?.closeCentralNotifySocket(deviceKey, address: address)
        keptConfigurations.withLock { $0[target.key] = target }
    }

    /// 5.82's `ccc_write_cb` for a central that leaves: its own socket is closed (no `StopNotify`);
    /// without one, the last subscriber gets the application a `StopNotify`.
    private func leave(_ target: SimulatorCore.CentralTarget) async {
        core?.setApplicationNotifyHandler(target.key, address: address, nil)
        let deviceKey = SimulatorCore.deviceSocketKey(target.key, address: address)
        core?.setApplicationNotifyHandler(deviceKey, address: address, nil)
        let count = core?.changeNotifyCount(target.key, by: -1) ?? 0
        if core?.closeCentralNotifySocket(deviceKey, address: address) == true { return }
        guard count == 0 else { return }
        if core?.closeApplicationNotifySocket(target.key) == true { return }
        _ = try? await target.connection.call(
            destination: target.owner, path: target.path, interface: Self.characteristicInterface, member: "StopNotify")
    }

    // MARK: Helpers

    var core: SimulatorCore? { coreReference.withLock { $0.core } }

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

    /// `append_options`: device, offset (when not zero), link, prepare-authorize (when set), mtu.
    private func options(offset: UInt16, prepareAuthorize: Bool = false) -> DBusValue {
        var values: [String: DBusValue] = [
            "device": .objectPath(SimulatorCore.devicePath(adapter: adapter.name, address: address)),
            "link": .string("LE"),
            "mtu": .uint16(mtu),
        ]
        if offset != 0 { values["offset"] = .uint16(offset) }
        if prepareAuthorize { values["prepare-authorize"] = .bool(true) }
        return .stringVariantDictionary(values)
    }
}
