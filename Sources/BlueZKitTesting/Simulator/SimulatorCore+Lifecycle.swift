internal import DBus

/// Starting, stopping and restarting the simulated bluetoothd on its bus.
extension SimulatorCore {
    static let busPath = ObjectPath.root.childOrRoot("org").childOrRoot("freedesktop").childOrRoot("DBus")

    /// Connects to the bus at `address`, serves the object tree for `present` adapters, then owns `org.bluez`.
    ///
    /// The state is built before the name is requested, so a client that sees
    /// `org.bluez` appear finds every adapter (and every bonded device) in
    /// `GetManagedObjects` at once.
    func connect(to address: String, adapters present: [AdapterState]) async throws(SimulatedBlueZError) {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.open(address: address, label: "bluezkit.simulated-bluez.dbus")
        } catch {
            throw SimulatedBlueZError(.busUnavailable, "cannot connect to \(address): \(error)")
        }
        let epoch = run { self.epoch }
        let answer: DBusConnection.RequestNameReply
        do throws(DBusError) {
            try await connection.exportSubtree(at: .root) { [weak self] invocation in
                guard let self else { return }
                self.queue.async { self.receive(invocation, epoch: epoch) }
            }
            let rule = DBusMatchRule(sender: .bus, path: Self.busPath, interface: .bus, member: "NameOwnerChanged")
            let subscription = try await connection.subscribe(rule) { [weak self] message in
                guard let self, let arguments = try? message.arguments(), arguments.count == 3,
                    let name = arguments[0].stringValue, name.hasPrefix(":"), arguments[2].stringValue == ""
                else { return }
                self.perform(ifEpoch: epoch) { self.clientLeft(name) }
            }
            run {
                self.connection = connection
                connectionSubscriptions = [subscription]
                buildState(present)
            }
            answer = try await connection.requestName("org.bluez")
        } catch {
            connection.close()
            throw SimulatedBlueZError(.nameUnavailable, "cannot serve org.bluez: \(error)")
        }
        guard answer == .primaryOwner || answer == .alreadyOwner else {
            connection.close()
            throw SimulatedBlueZError(.nameUnavailable, "org.bluez is owned by another connection")
        }
    }

    /// A call from the bus, on the queue. Calls to a bluetoothd that has since restarted are
    /// kept unanswered (their connection is closing) rather than failed.
    private func receive(_ invocation: DBusMethodInvocation, epoch: Int) {
        guard self.epoch == epoch else { return graveyard.append(invocation) }
        handleCall(invocation)
        flushSignals()
    }

    /// Fresh bluetoothd state: the adapters, and the bonded devices it reloads from storage.
    private func buildState(_ present: [AdapterState]) {
        for old in present {
            let adapter = AdapterState(name: old.name, address: old.address, configuration: old.configuration)
            adapters[adapter.name] = adapter
            loadStoredDevices(adapter)
            for peripheral in air[adapter.name] ?? [] {
                if let interval = peripheral.advertisingInterval { scheduleAdvertising(peripheral, every: interval) }
            }
        }
        pendingSignals = PendingSignals()
    }

    /// Disconnects bluetoothd from the bus: every signal and reply already sent is delivered
    /// first, then the connection closes (its calls in flight get `NoReply` from the bus), then
    /// the state is dropped. Returns the adapters that were present.
    func disconnect(flushing: Bool) async -> [AdapterState] {
        let (old, present) = run { () -> (DBusConnection?, [AdapterState]) in
            epoch += 1
            let old = connection
            // bluetoothd exiting destroys each advertising manager, releasing its advertisements.
            if flushing, let old {
                for registration in advertisements where registration.advertisement != nil {
                    sendRelease(registration, on: old)
                }
            }
            connection = nil
            return (
                old,
                adapters.values.sorted {
                    $0.name.count < $1.name.count || ($0.name.count == $1.name.count && $0.name < $1.name)
                }
            )
        }
        if let old {
            if flushing {
                // A round trip delivers what was sent before it; releasing the name (rather than
                // letting the bus notice the close) makes sure a new connection can take it at once.
                _ = try? await old.releaseName("org.bluez")
            }
            old.close()
        }
        run { resetState() }
        return present
    }

    /// The synchronous form of `disconnect` for `stop()` and deinit: no flush.
    func disconnectNow() {
        let old = run { () -> DBusConnection? in
            epoch += 1
            let old = connection
            connection = nil
            return old
        }
        old?.close()
        run { resetState() }
    }

    private func resetState() {
        closeAllAcquiredSockets()
        connectionSubscriptions = []
        adapters = [:]
        devices = [:]
        gattObjects = [:]
        overrides = [:]
        agents = [:]
        defaultAgents = []
        openAgentRequests = [:]
        securityWaiters = [:]
        applications = []
        applicationNotifyCounts = [:]
        for source in applicationNotifySockets.values { source.cancel() }
        applicationNotifySockets = [:]
        applicationNotifyDescriptors = [:]
        applicationNotifyHandlers = [:]
        heldNotifySocketCloses = []
        advertisements = []
        monitorApps = []
        for mirror in advertisingMirrors.values { mirror.attachment.withLock { $0.isInRange = false } }
        armedAttempts = [:]
        removalRequested = []
        temporaryTimers = TemporaryTimers()
        pendingSignals = PendingSignals()
        heldInvocations = []
        graveyard = []
        staleWork = []
    }
}
