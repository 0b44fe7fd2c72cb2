import BlueZ
import Foundation

/// The GATT client: discovery filters BlueZ's resolved database, reads,
/// writes and notifications call the attribute objects, values notified as
/// `PropertiesChanged` on `Value` reach characteristics we subscribed to.
extension CentralEngine {
    typealias AttributeID = BlueZClient.AttributeID

    /// The attribute objects handed out for one connection. Queue-confined.
    struct GattModel {
        var services: [AttributeID: Service] = [:]
        var characteristics: [AttributeID: Characteristic] = [:]
        var descriptors: [AttributeID: Descriptor] = [:]
        /// The characteristics the app subscribed to (or is subscribing to).
        var notifying: Set<AttributeID> = []
        /// The `AcquireNotify` sockets of subscribed characteristics.
        var notifySockets: [AttributeID: BlueZNotifySocket] = [:]
        /// Subscriptions whose `AcquireNotify` is under way; true when the app asked to stop meanwhile.
        var acquiringNotify: [AttributeID: Bool] = [:]
        /// The routes of subscribed characteristics' `StartNotify` values (`CentralEngine+Notify.swift`).
        var notifyRoutes: [AttributeID: NotifyRoute] = [:]
        /// The write-without-response paths, per characteristic.
        var writeChannels: [AttributeID: WriteChannel] = [:]
        /// `WriteValue` commands sent and not answered yet (flow control of the fallback path).
        var commandsInFlight = 0
        /// ``flushCommands(_:)`` is sending: a command that fails before its call returns leaves
        /// the rest to that loop instead of starting another one inside it.
        var flushingCommands = false
        /// The bus connection closed under the writes without response: they ended, with one warning.
        var writesEnded = false
        var mtu: Int?
        /// Whether the app's service discovery was answered once on this link (changes before are not modifications).
        var servicesDiscovered = false
        /// A database change is being collected (see `CentralEngine+ServiceChanges.swift`).
        var serviceChange: ServiceChange?
        /// Attribute objects of invalidated services that the app may still hold: operations on
        /// them fail. Weak, so the set shrinks as the app lets them go.
        var invalidated = InvalidatedAttributes()
    }

    // MARK: Discovery (on the queue)

    func discoverServices(_ peripheral: Peripheral, filter: [BluetoothUUID]?) {
        let id = peripheral.deviceID
        guard isConnected(peripheral, else: { .services([], $0) }) else { return }
        pendingServiceDiscoveries[id, default: []].append(filter)
        if client.device(id)?.servicesResolved == true { servicesResolved(id) }
    }

    /// `ServicesResolved` is true: answer the discoveries waiting for it, after
    /// a round trip to bluetoothd — real bluetoothd can signal
    /// `ServicesResolved` before the `InterfacesAdded` of the GATT objects.
    func servicesResolved(_ id: DeviceID) {
        guard pendingServiceDiscoveries[id] != nil else { return }
        onBusQueue { [self] in
            await client.synchronize(with: id)
            guard client.device(id)?.servicesResolved == true,
                let waiting = pendingServiceDiscoveries.removeValue(forKey: id), let peripheral = peripherals[id]
            else { return }
            for filter in waiting { finishServiceDiscovery(peripheral, filter: filter) }
        }
    }

    private func finishServiceDiscovery(_ peripheral: Peripheral, filter: [BluetoothUUID]?) {
        let id = peripheral.deviceID
        let database = client.gattDatabase(of: id)
        var model = gatt[id] ?? GattModel()
        var all: [Service] = []
        for info in database.services {
            guard let uuid = BluetoothUUID(parsing: info.uuid) else { continue }
            let service =
                model.services[info.id]
                ?? Service(uuid: uuid, isPrimary: info.isPrimary, peripheral: peripheral, id: info.id)
            model.services[info.id] = service
            all.append(service)
        }
        model.mtu = database.characteristics.compactMap(\.mtu).max().map(Int.init) ?? model.mtu
        model.servicesDiscovered = true
        gatt[id] = model
        BlueZLog.debug(
            "services of \(peripheral.identifier): \(database.services.map { "\($0.uuid) primary=\($0.isPrimary)" })")
        let wanted = filter.map(Set.init)
        let services = all.filter { $0.isPrimary && (wanted?.contains($0.uuid) ?? true) }
        manager?.post(.gatt(peripheral, .services(services, nil)))
    }

    func discoverIncludedServices(_ peripheral: Peripheral, service: Service, filter: [BluetoothUUID]?) {
        let id = peripheral.deviceID
        guard isConnected(peripheral, else: { .includedServices(service, [], $0) }), let model = gatt[id] else {
            return
        }
        let info = client.gattDatabase(of: id).services.first { $0.id == service.id }
        let wanted = filter.map(Set.init)
        let included = (info?.includes ?? []).compactMap { model.services[$0] }.filter {
            wanted?.contains($0.uuid) ?? true
        }
        manager?.post(.gatt(peripheral, .includedServices(service, included, nil)))
    }

    func discoverCharacteristics(_ peripheral: Peripheral, service: Service, filter: [BluetoothUUID]?) {
        let id = peripheral.deviceID
        guard isConnected(peripheral, else: { .characteristics(service, [], $0) }), var model = gatt[id] else { return }
        let wanted = filter.map(Set.init)
        var found: [Characteristic] = []
        for info in client.gattDatabase(of: id).characteristics where info.service == service.id {
            guard let uuid = BluetoothUUID(parsing: info.uuid), wanted?.contains(uuid) ?? true else { continue }
            let characteristic =
                model.characteristics[info.id]
                ?? Characteristic(
                    uuid: uuid, properties: CharacteristicProperties(bluez: info.flags), service: service,
                    id: info.id)
            model.characteristics[info.id] = characteristic
            found.append(characteristic)
        }
        gatt[id] = model
        for characteristic in found where model.notifying.contains(characteristic.id) {
            updateNotifyRoute(id, characteristic.id)
        }
        manager?.post(.gatt(peripheral, .characteristics(service, found, nil)))
    }

    func discoverDescriptors(_ peripheral: Peripheral, characteristic: Characteristic) {
        let id = peripheral.deviceID
        guard isConnected(peripheral, else: { .descriptors(characteristic, [], $0) }), var model = gatt[id] else {
            return
        }
        var found: [Descriptor] = []
        for info in client.gattDatabase(of: id).descriptors where info.characteristic == characteristic.id {
            guard let uuid = BluetoothUUID(parsing: info.uuid) else { continue }
            let descriptor =
                model.descriptors[info.id] ?? Descriptor(uuid: uuid, characteristic: characteristic, id: info.id)
            model.descriptors[info.id] = descriptor
            found.append(descriptor)
        }
        gatt[id] = model
        manager?.post(.gatt(peripheral, .descriptors(characteristic, found, nil)))
    }

    // MARK: Values (on the queue)

    func read(_ peripheral: Peripheral, characteristic: Characteristic) {
        guard isConnected(peripheral, else: { .value(characteristic, nil, $0) }),
            belongs(characteristic.id, to: peripheral, else: { .value(characteristic, nil, $0) }),
            isCurrent(characteristic, of: peripheral, else: { .value(characteristic, nil, $0) })
        else { return }
        onBusQueue { [self] in
            do throws(BlueZError) {
                let bytes = try await readValue(characteristic.id, descriptor: false, of: peripheral)
                manager?.post(.gatt(peripheral, .value(characteristic, Data(bytes), nil)))
            } catch {
                let failure = await operationError(error, of: peripheral)
                manager?.post(.gatt(peripheral, .value(characteristic, nil, failure)))
            }
        }
    }

    func read(_ peripheral: Peripheral, descriptor: Descriptor) {
        guard isConnected(peripheral, else: { .descriptorValue(descriptor, nil, $0) }),
            belongs(descriptor.id, to: peripheral, else: { .descriptorValue(descriptor, nil, $0) }),
            isCurrent(descriptor, of: peripheral, else: { .descriptorValue(descriptor, nil, $0) })
        else { return }
        onBusQueue { [self] in
            do throws(BlueZError) {
                let bytes = try await readValue(descriptor.id, descriptor: true, of: peripheral)
                manager?.post(.gatt(peripheral, .descriptorValue(descriptor, Data(bytes), nil)))
            } catch {
                let failure = await operationError(error, of: peripheral)
                manager?.post(.gatt(peripheral, .descriptorValue(descriptor, nil, failure)))
            }
        }
    }

    /// Writes `characteristic`; with response, its result names `request` (an async call's
    /// waiter), and results reach the app in the order of the writes (``finishWrite(_:of:_:)``).
    func write(
        _ peripheral: Peripheral, data: Data, characteristic: Characteristic, withResponse: Bool,
        request: UInt64? = nil
    ) {
        guard isConnected(peripheral, else: { withResponse ? .wrote(characteristic, $0, request: request) : nil }),
            belongs(
                characteristic.id, to: peripheral,
                else: { withResponse ? .wrote(characteristic, $0, request: request) : nil }),
            isCurrent(
                characteristic, of: peripheral,
                else: { withResponse ? .wrote(characteristic, $0, request: request) : nil })
        else { return }
        guard withResponse else { return writeWithoutResponse(peripheral, Array(data), characteristic: characteristic) }
        let ticket = writeResults[peripheral.deviceID, default: WriteResultOrder()].issue()
        client.writeValueInOrder(characteristic.id, descriptor: false, value: Array(data), withResponse: true) {
            [self] error in
            guard let error else {
                return finishWrite(ticket, of: peripheral, .wrote(characteristic, nil, request: request))
            }
            reportFailure(error, of: peripheral) { [self] in
                finishWrite(ticket, of: peripheral, .wrote(characteristic, $0, request: request))
            }
        }
    }

    /// Writes `descriptor`; its result names `request`, and comes in the order of the writes.
    func write(_ peripheral: Peripheral, data: Data, descriptor: Descriptor, request: UInt64? = nil) {
        let refused = { (error: BluetoothError) -> CentralManager.GattEvent? in
            .wroteDescriptor(descriptor, error, request: request)
        }
        guard isConnected(peripheral, else: refused), belongs(descriptor.id, to: peripheral, else: refused),
            isCurrent(descriptor, of: peripheral, else: refused)
        else { return }
        let ticket = writeResults[peripheral.deviceID, default: WriteResultOrder()].issue()
        client.writeValueInOrder(descriptor.id, descriptor: true, value: Array(data), withResponse: true) {
            [self] error in
            guard let error else {
                return finishWrite(ticket, of: peripheral, .wroteDescriptor(descriptor, nil, request: request))
            }
            reportFailure(error, of: peripheral) { [self] in
                finishWrite(ticket, of: peripheral, .wroteDescriptor(descriptor, $0, request: request))
            }
        }
    }

    /// The results of a peripheral's writes with response, posted in the order of the writes,
    /// as Core Bluetooth reports them (ATT answers one request after the other): a failure
    /// that takes a round trip to bluetoothd to explain (``operationError(_:of:)``) holds back
    /// the results of the writes after it. Queue-confined.
    struct WriteResultOrder {
        /// Tickets handed out (one per write sent) and posted, in order.
        private var issued = 0
        private var posted = 0
        /// Results in, waiting for an earlier one, by ticket.
        private var waiting: [Int: CentralManager.GattEvent] = [:]

        /// The ticket of a write about to be sent.
        mutating func issue() -> Int {
            defer { issued += 1 }
            return issued
        }

        /// Takes in the result of `ticket`; returns the results that may be posted now, in order.
        mutating func finish(_ ticket: Int, _ event: CentralManager.GattEvent) -> [CentralManager.GattEvent] {
            waiting[ticket] = event
            var ready: [CentralManager.GattEvent] = []
            while let next = waiting.removeValue(forKey: posted) {
                ready.append(next)
                posted += 1
            }
            return ready
        }

        /// Every write sent has had its result posted.
        var isIdle: Bool { posted == issued }
    }

    /// The result of the write with `ticket` is in: posts it and the results it held back.
    private func finishWrite(_ ticket: Int, of peripheral: Peripheral, _ event: CentralManager.GattEvent) {
        let id = peripheral.deviceID
        guard var order = writeResults[id] else { return }
        let ready = order.finish(ticket, event)
        writeResults[id] = order.isIdle ? nil : order
        for event in ready { manager?.post(.gatt(peripheral, event)) }
    }

    /// Forgets the attribute objects of a link that ended; waiting discoveries fail.
    func resetGatt(_ id: DeviceID) {
        if let model = gatt[id] {
            for socket in model.notifySockets.values { socket.close() }
            for channel in model.writeChannels.values { channel.socket?.close() }
            model.endNotifyRoutes()
        }
        gatt[id] = nil
        peripherals[id]?.update(canSendWriteWithoutResponse: true)
        restoredSubscriptions[id] = nil
        guard let waiting = pendingServiceDiscoveries.removeValue(forKey: id), let peripheral = peripherals[id] else {
            return
        }
        let error = BluetoothError(.peripheralDisconnected, message: "the link ended during service discovery")
        for _ in waiting { manager?.post(.gatt(peripheral, .services([], error))) }
    }

    /// The negotiated ATT MTU of a peripheral, if BlueZ reported one.
    func mtu(of peripheral: Peripheral) -> Int? {
        busQueue.sync { gatt[peripheral.deviceID]?.mtu }
    }

    // MARK: Helpers

    /// True when `attribute` is one of `peripheral`'s; otherwise posts `event(invalidParameters)`
    /// (if any) and returns false: an attribute of another peripheral is a mistake to report, not
    /// a request to send to the other device.
    func belongs(
        _ attribute: AttributeID, to peripheral: Peripheral, else event: (BluetoothError) -> CentralManager.GattEvent?
    ) -> Bool {
        if attribute.belongs(to: peripheral.deviceID) { return true }
        let message = "the attribute belongs to another peripheral"
        if let failure = event(BluetoothError(.invalidParameters, message: message)) {
            manager?.post(.gatt(peripheral, failure))
        }
        return false
    }

    /// True when the peripheral is connected; otherwise posts `event(notConnected)` (if any) and returns false.
    func isConnected(
        _ peripheral: Peripheral, else event: (BluetoothError) -> CentralManager.GattEvent?
    ) -> Bool {
        if links[peripheral.deviceID]?.phase == .connected { return true }
        if let failure = event(BluetoothError(.notConnected, message: "the peripheral is not connected")) {
            manager?.post(.gatt(peripheral, failure))
        }
        return false
    }

    /// The error of a failed read or write: ``gattError(_:)``, except that a failed pairing is
    /// ``BluetoothError/Code/pairingFailed`` (keeping the ATT error as `underlying`).
    ///
    /// bluetoothd 5.66 reports no pairing failure to GATT clients: when the encryption a
    /// characteristic needs cannot be set up (an agent refused, a passkey differed, no agent),
    /// the kernel ends the link, and the operation waiting on it fails with ATT 0x0E
    /// (`disc_att_send_op` in `src/shared/att.c`: an error response without a PDU, which
    /// `process_error` turns into Unlikely Error). So ATT 0x0E is taken for a failed pairing
    /// when, after a round trip to bluetoothd, the peripheral is neither paired nor connected,
    /// and bluetoothd gave no reason for the link's end or an authentication failure. With a
    /// reason (`Device1.Disconnected`, 5.83 and later) the link's end is reported as it was: a
    /// peripheral that ends the link with a request in flight is `peripheralDisconnected`, a
    /// supervision timeout `connectionTimeout`.
    /// Connected means our link too: bluetoothd (5.66 to at least 5.87) may never signal
    /// `Connected` true for a link made with `Device1.Connect` (its ATT callback marks the LE
    /// bearer connected before the kernel's connection event, which then returns "already
    /// connected" without emitting; seen with dbus-monitor on 5.82), so the cache can say false
    /// for a link that is up; a link that ended has had its `Connected` false by then.
    /// In a task on the bus queue (``onBusQueue(_:)``): it reads the object cache.
    func operationError(_ error: BlueZError, of peripheral: Peripheral) async -> any Error {
        dispatchPrecondition(condition: .onQueue(busQueue))
        let mapped = Self.gattError(error)
        guard let att = mapped as? ATTError, att.code == .unlikelyError else { return mapped }
        let id = peripheral.deviceID
        await client.synchronize(with: id)
        let device = client.device(id)
        guard device?.paired != true && device?.connected != true && links[id]?.phase != .connected else {
            return mapped
        }
        switch client.disconnectReason(of: id) ?? linkEndReasons[id] {
        case nil, .authentication?:
            return BluetoothError(
                .pairingFailed, message: "pairing failed and bluetoothd ended the link (\(att.message))",
                underlying: att)
        case .timeout?:
            return BluetoothError(
                .connectionTimeout, message: "the link timed out while the request was in flight", underlying: att)
        case .remote?, .local?, .suspend?, .unknown?, .other?:
            return BluetoothError(
                .peripheralDisconnected, message: "the link ended while the request was in flight", underlying: att)
        }
    }

    /// Hands ``operationError(_:of:)`` to `post`: at once unless it needs a round trip to bluetoothd.
    private func reportFailure(
        _ error: BlueZError, of peripheral: Peripheral, post: @escaping @Sendable (any Error) -> Void
    ) {
        let mapped = Self.gattError(error)
        guard (mapped as? ATTError)?.code == .unlikelyError else { return post(mapped) }
        onBusQueue { [self] in post(await operationError(error, of: peripheral)) }
    }

    /// An ATT error where BlueZ reported one, else a Bluetooth error keeping the D-Bus error.
    static func gattError(_ error: BlueZError) -> any Error {
        if let att = ATTError(bluez: error) { return att }
        if error.code == .notConnected || error.code == .unknownObject {
            return BluetoothError(.notConnected, message: error.description, underlying: error)
        }
        if error.code == .timeout || error.code == .noReply {
            return BluetoothError(.connectionTimeout, message: error.description, underlying: error)
        }
        return BluetoothError(.unknown, message: error.description, underlying: error)
    }
}
