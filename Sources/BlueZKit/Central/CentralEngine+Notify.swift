import BlueZ
import Foundation

/// Subscriptions: `AcquireNotify` where bluetoothd offers it, `StartNotify` otherwise.
///
/// With `AcquireNotify` every notification is one datagram on a socket, read on the manager's
/// queue and handed to the delegate there: no bus message, no hop through the connection's
/// queue. bluetoothd 5.66 offers it for characteristics with the notify property only (not for
/// indications), to one client at a time, and not while any client has a `StartNotify` session;
/// whenever it refuses, the subscription falls back to `StartNotify`, whose values arrive as
/// `PropertiesChanged` on `Value`. Either way a subscription ends with the link.
extension CentralEngine {
    func setNotify(_ peripheral: Peripheral, enabled: Bool, characteristic: Characteristic) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        guard isConnected(peripheral, else: { .notifyState(characteristic, characteristic.isNotifying, $0) }),
            belongs(attribute, to: peripheral, else: { .notifyState(characteristic, characteristic.isNotifying, $0) })
        else { return }
        if enabled {
            if gatt[id]?.acquiringNotify[attribute] != nil {
                gatt[id]?.acquiringNotify[attribute] = false
                return
            }
            if gatt[id]?.notifySockets[attribute] != nil {
                manager?.post(.gatt(peripheral, .notifyState(characteristic, true, nil)))
                return
            }
            gatt[id]?.notifying.insert(attribute)
            subscribe(peripheral, characteristic, report: true)
            return
        }
        if gatt[id]?.acquiringNotify[attribute] != nil {
            // Answered once AcquireNotify has: the app hears on, then off, in the order it asked.
            gatt[id]?.acquiringNotify[attribute] = true
            return
        }
        if let socket = gatt[id]?.notifySockets.removeValue(forKey: attribute) {
            socket.close()
            gatt[id]?.notifying.remove(attribute)
            updateNotifyRoute(id, attribute)
            manager?.post(.gatt(peripheral, .notifyState(characteristic, false, nil)))
            return
        }
        onBusQueue { [self] in
            do throws(BlueZError) {
                try await client.setNotify(attribute, enabled: false)
                gatt[id]?.notifying.remove(attribute)
                updateNotifyRoute(id, attribute)
                manager?.post(.gatt(peripheral, .notifyState(characteristic, false, nil)))
            } catch {
                manager?.post(.gatt(peripheral, .notifyState(characteristic, true, Self.gattError(error))))
            }
        }
    }

    /// Starts a subscription the model already lists in `notifying`; `report` tells the delegate
    /// how it went (restored subscriptions report only failures).
    func subscribe(_ peripheral: Peripheral, _ characteristic: Characteristic, report: Bool) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        // Values are notifications from now on (until a socket is acquired): the route first.
        updateNotifyRoute(id, attribute)
        let offersSocket = usesNotifySockets && client.characteristic(attribute)?.offersAcquireNotify == true
        guard offersSocket, let manager else { return startNotify(peripheral, characteristic, report: report) }
        gatt[id]?.acquiringNotify[attribute] = false
        let queue = manager.queue
        onBusQueue { [self] in
            let result: Result<BlueZAcquiredSocket, BlueZError>
            do throws(BlueZError) {
                result = .success(try await client.acquireNotify(attribute))
            } catch {
                result = .failure(error)
            }
            guard let stopAsked = gatt[id]?.acquiringNotify.removeValue(forKey: attribute) else {
                // The link ended meanwhile: the descriptor (if any) closes with `result`.
                return
            }
            switch result {
            case .success(let acquired):
                // The state first: the socket's first value is queued after it.
                if report { self.manager?.post(.gatt(peripheral, .notifyState(characteristic, true, nil))) }
                let socket = notifySocket(acquired, peripheral, characteristic, queue: queue)
                gatt[id]?.notifySockets[attribute] = socket
                updateNotifyRoute(id, attribute)
                if stopAsked { setNotify(peripheral, enabled: false, characteristic: characteristic) }
            case .failure(let error):
                BlueZLog.debug("AcquireNotify refused (\(error)); subscribing with StartNotify")
                startNotify(peripheral, characteristic, report: report)
                if stopAsked { setNotify(peripheral, enabled: false, characteristic: characteristic) }
            }
        }
    }

    /// A socket whose datagrams go straight to the delegate on the manager's queue.
    private func notifySocket(
        _ acquired: BlueZAcquiredSocket, _ peripheral: Peripheral, _ characteristic: Characteristic,
        queue: DispatchQueue
    ) -> BlueZNotifySocket {
        let manager = self.manager
        let socket = BlueZNotifySocket(
            acquired, queue: queue,
            onValue: { [weak manager] bytes in
                manager?.deliverNotification(Data(bytes), of: characteristic, from: peripheral)
            },
            onClose: { [weak self] in
                guard let self else { return }
                self.busQueue.async { self.notifySocketClosed(peripheral, characteristic) }
            })
        return socket
    }

    /// bluetoothd closed a notification socket. When the link is still up after a round trip
    /// (the link going down closes it too, and is reported as a disconnection), the subscription
    /// goes on through `StartNotify`: bluetoothd's socket path has quirks with some peripherals
    /// (bleak reverted to `StartNotify` by default for them), and the app asked for values.
    private func notifySocketClosed(_ peripheral: Peripheral, _ characteristic: Characteristic) {
        let id = peripheral.deviceID
        guard gatt[id]?.notifySockets.removeValue(forKey: characteristic.id) != nil else { return }
        updateNotifyRoute(id, characteristic.id)
        onBusQueue { [self] in
            await client.synchronize(with: id)
            guard links[id]?.phase == .connected, gatt[id]?.notifying.contains(characteristic.id) == true,
                gatt[id]?.notifySockets[characteristic.id] == nil, !isBeingRemoved(characteristic, of: id)
            else { return }
            BlueZLog.warning("bluetoothd closed the notification socket of \(characteristic.uuid); using StartNotify")
            startNotify(peripheral, characteristic, report: false)
        }
    }

    private func startNotify(_ peripheral: Peripheral, _ characteristic: Characteristic, report: Bool) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        onBusQueue { [self] in
            do throws(BlueZError) {
                try await client.setNotify(attribute, enabled: true)
                if report { manager?.post(.gatt(peripheral, .notifyState(characteristic, true, nil))) }
            } catch {
                if !report { BlueZLog.warning("could not subscribe again to a restored characteristic: \(error)") }
                // A subscription that needs encryption fails like a read when pairing fails.
                let failure = await operationError(error, of: peripheral)
                gatt[id]?.notifying.remove(attribute)
                updateNotifyRoute(id, attribute)
                manager?.post(.gatt(peripheral, .notifyState(characteristic, false, failure)))
            }
        }
    }

    /// A `Value` change from bluetoothd that no route took: a notification when we subscribed
    /// with `StartNotify`. Rare: the subscribed characteristics' values take their routes
    /// (``updateNotifyRoute(_:_:)``); these are values read, or of other characteristics, or
    /// received while bluetoothd's tree was being loaded.
    func valueChanged(_ attribute: AttributeID, _ bytes: [UInt8]) {
        guard let id = attribute.device, let characteristic = gatt[id]?.startNotifyTarget(attribute),
            let peripheral = peripherals[id]
        else { return }
        manager?.postNotification(Data(bytes), of: characteristic, from: peripheral)
    }

    /// A subscribed characteristic's route: the client's claim on its values, and where they go.
    struct NotifyRoute {
        let route: BlueZClient.ValueRoute
        let characteristic: Characteristic
        let peripheral: Peripheral
    }

    /// Makes the route of `attribute`'s `Value` changes agree with the model: a route to its
    /// characteristic and peripheral while `StartNotify` values of it are notifications (the app
    /// subscribed, through no socket: `startNotifyTarget`), none otherwise. Called wherever one
    /// of those changes (subscribing, unsubscribing, a socket acquired or closed, a failed
    /// subscription, restoration, discovery); a link's end and a database change end the
    /// routes with the model (``GattModel/endNotifyRoutes()``). On the queue.
    ///
    /// A value then goes from the signal router to the manager with no lookup, and no cache of
    /// the model that could fall out of step with it.
    func updateNotifyRoute(_ id: DeviceID, _ attribute: AttributeID) {
        guard let model = gatt[id] else { return }
        let current = model.notifyRoutes[attribute]
        guard let characteristic = model.startNotifyTarget(attribute), let peripheral = peripherals[id] else {
            if let current {
                current.route.cancel()
                gatt[id]?.notifyRoutes[attribute] = nil
            }
            return
        }
        if let current, current.characteristic === characteristic, current.peripheral === peripheral { return }
        current?.route.cancel()
        let route = client.routeValues(of: attribute) { [weak manager] bytes in
            manager?.postNotification(Data(bytes), of: characteristic, from: peripheral)
        }
        gatt[id]?.notifyRoutes[attribute] = route.map {
            NotifyRoute(route: $0, characteristic: characteristic, peripheral: peripheral)
        }
    }
}

extension CentralEngine.GattModel {
    /// The characteristic a `Value` change of `attribute` notifies: one the app subscribed to
    /// through `StartNotify` (not through a socket).
    func startNotifyTarget(_ attribute: CentralEngine.AttributeID) -> Characteristic? {
        guard notifySockets[attribute] == nil, notifying.contains(attribute) else { return nil }
        return characteristics[attribute]
    }

    /// Ends every route of the model (its link ended, or its peripheral was forgotten).
    func endNotifyRoutes() {
        for route in notifyRoutes.values { route.route.cancel() }
    }
}

extension CentralEngine {
    /// How many value routes the model of `peripheral` holds (for tests; off the queue).
    func notifyRouteCount(of peripheral: Peripheral) -> Int {
        busQueue.sync { gatt[peripheral.deviceID]?.notifyRoutes.count ?? 0 }
    }
}
