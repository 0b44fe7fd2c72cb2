import BlueZ
import Dispatch

/// Connections that never time out.
///
/// A connect request stays pending until it succeeds or is cancelled:
/// `Device1.Connect` is retried after every failure — at once when the device
/// is seen advertising again, otherwise after a back-off that grows from
/// 250 ms to 30 s — so success does not depend on catching one advertisement
/// at one instant. A device that vanished from bluetoothd's cache is looked
/// for with a discovery of our own while the app is not scanning (bluetoothd
/// can only connect to devices it knows). `didConnect` follows a successful
/// `Connect` reply, not the `Connected` signal, which BlueZ 5.66 can omit.
extension CentralEngine {
    /// One requested or established connection: the owner of the link's state, in ``links`` on
    /// the bus queue. Two projections follow it, written from the events the engine posts for
    /// it (`CentralManager.post(_:)`) on the delegate queue, right before the delegate call:
    /// ``Peripheral/state`` (and, at a request, `.connecting` at once, by
    /// ``connect(_:autoReconnect:)``, as Core Bluetooth's `state` reads right after
    /// `connect`), and the manager's `linked` list, which restoration saves.
    struct Link {
        enum Phase { case pending, connected, disconnecting }
        var phase: Phase = .pending
        var attemptInFlight = false
        /// The `Connect` call under way; cancelled when the device object vanishes
        /// (bluetoothd then never answers it).
        var attemptTask: Task<Void, Never>?
        var retry: (any DispatchSourceTimer)?
        var backoff: Duration = CentralEngine.firstRetryDelay
        /// The device advertised while an attempt was under way: retry at once if it fails.
        var advertisedDuringAttempt = false
        var attempts = 0
        /// `CBConnectPeripheralOptionEnableAutoReconnect`: a lost link becomes a pending request again.
        var autoReconnect = false
    }

    static let firstRetryDelay: Duration = .milliseconds(250)
    static let longestRetryDelay: Duration = .seconds(30)

    // MARK: Requests (any thread)

    /// Requests a connection (any thread): the peripheral reads `.connecting` when this returns,
    /// unless it is linked already; the link itself is made on the bus queue.
    func connect(_ peripheral: Peripheral, autoReconnect: Bool = false) {
        peripheral.markConnecting()
        busQueue.async { [self] in
            let id = peripheral.deviceID
            guard links[id] == nil else { return }  // pending or connected already: Core Bluetooth does nothing
            // Its device object may have gone since the app got it (its adapter unplugged under
            // the link: the delegate asks again from didDisconnect): known again, so that the
            // request's outcome reaches the app.
            adopt(peripheral)
            var link = Link()
            link.autoReconnect = autoReconnect
            links[id] = link
            manager?.post(.link(peripheral, .connecting))
            attempt(id)
            updateBackgroundDiscovery()
        }
    }

    func cancelConnection(_ peripheral: Peripheral) {
        busQueue.async { [self] in
            let id = peripheral.deviceID
            guard var link = links[id] else { return }
            link.retry?.cancel()
            switch link.phase {
            case .pending:
                links[id] = nil
                if link.attemptInFlight {
                    // bluetoothd keeps a `Connect` under way going (the kernel waits for the
                    // device's next advertisement), and would bring the link up after the
                    // cancel: `Disconnect` stops it at once (`device_request_disconnect` shuts
                    // the ATT socket being connected and fails the `Connect`). A later request's
                    // `Connect` waits for it (`attempt`).
                    let previous = teardowns[id]
                    teardowns[id] = onBusQueue { [self] in
                        await previous?.value
                        try? await client.disconnect(id)
                    }
                }
                manager?.post(.link(peripheral, .disconnected(nil)))
                updateBackgroundDiscovery()
            case .connected:
                link.phase = .disconnecting
                links[id] = link
                manager?.post(.link(peripheral, .disconnecting))
                onBusQueue { [self] in
                    do throws(BlueZError) { try await client.disconnect(id) } catch {
                        BlueZLog.debug("Disconnect: \(error)")
                    }
                    guard links[id]?.phase == .disconnecting else { return }
                    links[id] = nil
                    resetGatt(id)
                    manager?.post(.link(peripheral, .disconnected(nil)))
                }
            case .disconnecting:
                break
            }
        }
    }

    // MARK: On the queue

    func attempt(_ id: DeviceID) {
        guard var link = links[id], link.phase == .pending, !link.attemptInFlight else { return }
        link.retry?.cancel()
        link.retry = nil
        link.attemptInFlight = true
        link.attempts += 1
        link.advertisedDuringAttempt = false
        let teardown = teardowns.removeValue(forKey: id)
        // While our discovery runs the kernel would wait for the device's next advertisement
        // to connect: pause it (`CentralEngine+ConnectPause.swift`).
        let pause = pauseDiscovery(for: id)
        link.attemptTask = onBusQueue { [self] in
            // Not while the link of a cancelled request is being taken down: this Connect
            // would find it still up and succeed at once, and the Disconnect then end it.
            await teardown?.value
            await pause?.value
            // Cancelled while it waited: no `Connect` for a request that is gone.
            guard links[id] != nil else { return connectAttemptEnded(id) }
            let result: BlueZError?
            do throws(BlueZError) {
                try await client.connect(id)
                result = nil
            } catch { result = error }
            connectAttemptEnded(id)
            attemptFinished(id, error: result)
        }
        links[id] = link
    }

    /// The device object vanished: a `Connect` under way will never be answered, so give it up.
    func abandonAttempt(_ id: DeviceID) {
        links[id]?.attemptTask?.cancel()
    }

    private func attemptFinished(_ id: DeviceID, error: BlueZError?) {
        dispatchPrecondition(condition: .onQueue(busQueue))
        guard var link = links[id], link.phase == .pending else {
            // Cancelled while Connect was on its way: take the link down again, before any
            // later request's Connect (see `attempt`).
            if error == nil, links[id] == nil {
                let previous = teardowns[id]
                teardowns[id] = onBusQueue { [self] in
                    await previous?.value
                    try? await client.disconnect(id)
                }
            }
            return
        }
        link.attemptInFlight = false
        link.attemptTask = nil
        // Stored before anything else: a link left "in flight" is never tried again, neither on
        // an advertisement nor by a timer (what left a request pending for ever when the engine
        // had forgotten its peripheral).
        links[id] = link
        guard let peripheral = peripherals[id] else { return }
        if let error {
            BlueZLog.debug("Connect attempt \(link.attempts) failed: \(error); the request stays pending")
            if Self.isPermanent(error) {
                links[id] = nil
                manager?.post(.link(peripheral, .failed(Self.connectionError(error))))
                updateBackgroundDiscovery()
                return
            }
            if link.advertisedDuringAttempt {
                link.advertisedDuringAttempt = false
                link.backoff = Self.firstRetryDelay
                links[id] = link
                attempt(id)
            } else {
                scheduleRetry(&link, id)
                links[id] = link
            }
            updateBackgroundDiscovery()
            return
        }
        link.phase = .connected
        link.backoff = Self.firstRetryDelay
        links[id] = link
        linkEndReasons[id] = nil
        manager?.post(.link(peripheral, .connected))
        if client.device(id)?.servicesResolved == true {
            servicesResolved(id)
            resubscribeRestored(id)
        }
        updateBackgroundDiscovery()
    }

    private func scheduleRetry(_ link: inout Link, _ id: DeviceID) {
        let delay = link.backoff
        link.backoff = min(link.backoff * 2, Self.longestRetryDelay)
        let timer = DispatchSource.makeTimerSource(queue: busQueue)
        timer.schedule(deadline: .now() + delay.dispatchInterval)
        timer.setEventHandler { [weak self] in self?.attempt(id) }
        link.retry = timer
        timer.resume()
    }

    /// The device advertised: a pending request tries again now.
    func sawAdvertisement(_ id: DeviceID) {
        guard var link = links[id], link.phase == .pending else { return }
        if link.attemptInFlight {
            link.advertisedDuringAttempt = true
            links[id] = link
            return
        }
        link.backoff = Self.firstRetryDelay
        links[id] = link
        attempt(id)
    }

    /// Connected=false (or the device object vanished) for a link we hold.
    ///
    /// The error carries the reason bluetoothd gave in `Device1.Disconnected` (5.83 and later),
    /// as a ``DisconnectReport`` (``BluetoothError/disconnectReason``), with Core Bluetooth's
    /// code for it (``DisconnectReason/errorCode``); without a signal the reason is
    /// ``DisconnectReason/notReported``. The same error goes with an automatic reconnection.
    func linkLost(_ id: DeviceID) {
        let disconnection = client.takeDisconnection(of: id)
        linkEndReasons[id] = disconnection?.reason
        guard let link = links[id], link.phase == .connected, let peripheral = peripherals[id] else { return }
        resetGatt(id)
        let error = DisconnectReport(disconnection).error
        if link.autoReconnect {
            // Reconnect by ourselves, as iOS 17 does with EnableAutoReconnect: the request is
            // pending again at once, and didConnect follows when it succeeds.
            var pending = Link()
            pending.autoReconnect = true
            links[id] = pending
            manager?.post(.link(peripheral, .disconnectedReconnecting(error)))
            attempt(id)
        } else {
            links[id] = nil
            manager?.post(.link(peripheral, .disconnected(error)))
        }
        updateBackgroundDiscovery()
    }

    /// Discovers on our own while a pending request's device is missing from
    /// bluetoothd's cache and the app is not scanning.
    func updateBackgroundDiscovery() {
        let missing = links.contains { id, link in link.phase == .pending && client.device(id) == nil }
        let wanted = missing && scan == nil
        guard wanted != backgroundDiscovery else { return }
        backgroundDiscovery = wanted
        inDiscoveryOrder {
            // The wish changed again after this command was queued, and queued its own: this one
            // is stale. Run, it would start a discovery after a stop that a later command took
            // for the last word (a `stopScan()` that found the device back stops the scan's
            // session; a start queued before it then began one that nothing stopped).
            guard self.backgroundDiscovery == wanted else {
                return BlueZLog.debug("background discovery: \(wanted ? "start" : "stop") superseded")
            }
            do throws(BlueZError) {
                BlueZLog.debug("background discovery: \(wanted ? "start" : "stop")")
                if wanted {
                    try await self.client.setDiscoveryFilter(uuids: [], duplicateData: false, rssi: nil, pattern: nil)
                    try await self.client.startDiscovery()
                } else if self.scan == nil {
                    try await self.client.stopDiscovery()
                }
            } catch  where error.code == .disconnected {
                // The manager was released and its connection closed.
            } catch  where wanted && error.code == .inProgress {
                // Our discovery session runs already (a scan's, which a `stopScan()` queued
                // before this start handed over): it is the background discovery now, and is
                // stopped when no connection needs it. Taken as failed, it ran on for ever.
                BlueZLog.debug("background discovery: ours runs already")
            } catch {
                BlueZLog.warning("background discovery (\(wanted ? "start" : "stop")): \(error)")
                // Not discovering after all (bluetoothd or the adapter is away): the next
                // attempt, or the adapter's return, tries again.
                guard wanted else { return }
                self.backgroundDiscovery = false
                // A start whose reply was lost may have taken effect: bluetoothd (5.66 to 5.87,
                // `start_discovery` in src/adapter.c) registers the session when the call arrives
                // and answers once the kernel has started; a stop ends a discovery nobody would
                // otherwise stop. Not while a scan of the app's runs.
                if error.code == .timeout || error.code == .noReply, self.scan == nil {
                    await self.stopLateStartedDiscovery()
                }
            }
        }
    }

    /// `StopDiscovery` after a start whose reply was lost (on the queue, in discovery order): the
    /// background discovery's, or a scan's that `stopScan()` found still unanswered.
    /// While that start is still under way bluetoothd answers Busy (`InProgress`: `stop_discovery`
    /// refuses a session whose start has not been answered), so it asks again, every 500 ms for up
    /// to 10 s; "No discovery started" (the start never took effect) or success ends it.
    func stopLateStartedDiscovery() async {
        for _ in 0..<20 {
            do throws(BlueZError) {
                try await client.stopDiscovery()
                return
            } catch  where error.code == .inProgress {
                try? await Task.sleep(for: .milliseconds(500))
            } catch {
                return
            }
        }
        BlueZLog.warning("background discovery: bluetoothd kept a late start under way; not stopped")
    }

    /// `Device1.Paired` and `Bonded` (any thread but the queue).
    func pairing(of peripheral: Peripheral) -> (paired: Bool, bonded: Bool) {
        busQueue.sync {
            let device = client.device(peripheral.deviceID)
            return (device?.paired ?? false, device?.bonded ?? false)
        }
    }

    /// `Adapter1.RemoveDevice`: forgets the device and its pairing.
    func removeDevice(_ peripheral: Peripheral) async throws(BluetoothError) {
        do throws(BlueZError) {
            try await client.removeDevice(peripheral.deviceID)
        } catch {
            throw BluetoothError(.unknown, message: error.description, underlying: error)
        }
    }

    /// Errors after which no retry can succeed.
    static func isPermanent(_ error: BlueZError) -> Bool {
        [.notSupported, .invalidArguments, .accessDenied].contains(error.code)
    }

    static func connectionError(_ error: BlueZError) -> BluetoothError {
        BluetoothError(.connectionFailed, message: error.description, underlying: error)
    }
}
