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
            manager?.post(.gatt(peripheral, .notifyState(characteristic, false, nil)))
            return
        }
        onBusQueue { [self] in
            do throws(BlueZError) {
                try await client.setNotify(attribute, enabled: false)
                gatt[id]?.notifying.remove(attribute)
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
                manager?.post(.gatt(peripheral, .notifyState(characteristic, false, failure)))
            }
        }
    }

    /// A `Value` change from bluetoothd: a notification when we subscribed with `StartNotify`.
    ///
    /// The hottest event of a subscribed central: one lookup in `notifyRoutes` once the first
    /// value of the attribute found its characteristic and peripheral in the model, none while
    /// the same attribute notifies again (`lastNotifyRoute`).
    func valueChanged(_ attribute: AttributeID, _ bytes: [UInt8]) {
        let route: NotifyRoute
        if let last = lastNotifyRoute, last.attribute == attribute {
            route = last.route
        } else if let known = notifyRoutes[attribute] {
            route = known
            lastNotifyRoute = (attribute, known)
        } else {
            guard let id = attribute.device, let characteristic = gatt[id]?.startNotifyTarget(attribute),
                let peripheral = peripherals[id]
            else { return }
            route = NotifyRoute(peripheral: peripheral, characteristic: characteristic)
            notifyRoutes[attribute] = route
            lastNotifyRoute = (attribute, route)
        }
        manager?.postNotification(Data(bytes), of: route.characteristic, from: route.peripheral)
    }

    /// The characteristic and peripheral a subscribed attribute's values go to.
    struct NotifyRoute {
        let peripheral: Peripheral
        let characteristic: Characteristic
    }

    /// Empties `notifyRoutes`: called whenever `gatt` or `peripherals` changes, so that a route
    /// is never older than the model it was read from.
    func forgetNotifyRoutes() {
        if !notifyRoutes.isEmpty { notifyRoutes.removeAll() }
        lastNotifyRoute = nil
    }
}

extension CentralEngine.GattModel {
    /// The characteristic a `Value` change of `attribute` notifies: one the app subscribed to
    /// through `StartNotify` (not through a socket).
    func startNotifyTarget(_ attribute: CentralEngine.AttributeID) -> Characteristic? {
        guard notifySockets[attribute] == nil, notifying.contains(attribute) else { return nil }
        return characteristics[attribute]
    }
}
