import BlueZ
import Foundation

/// Passive scanning (``ScanOptions/passive``) through BlueZ's advertisement monitor: an
/// `AdvertisementMonitor1` object of ours registered with
/// `AdvertisementMonitorManager1.RegisterMonitor` instead of `StartDiscovery`.
///
/// bluetoothd calls `DeviceFound` with a device once an advertisement of it matched the
/// patterns (after it created or updated the `Device1` object, whose properties the cache has by
/// then); from then on, the device's advertisements are reported by the same rules as an active
/// scan's, until `DeviceLost`. All of it happens on the bus queue.
extension CentralEngine {
    /// The monitor of the running passive scan and what it found (on the bus queue).
    struct PassiveSession {
        /// Which scan this is (``CentralEngine/scanGeneration``), so that a late event of an
        /// earlier monitor is not taken for this one's.
        let generation: Int
        let configuration: BlueZAdvertisementMonitor.Configuration
        /// Whether registering it has begun (in discovery order).
        var started = false
        var monitor: BlueZAdvertisementMonitor?
        var adapter: BlueZClient.AdapterID?
        var activated = false
        /// Devices bluetoothd reported with `DeviceFound` and not yet with `DeviceLost`.
        var found: Set<DeviceID> = []
        /// Told once: nil when the monitor runs (`Activate`), or why it does not.
        var completion: (@Sendable (BluetoothError?) -> Void)?
    }

    /// Starts a passive scan for `options.passive`, replacing the running scan.
    /// `completion` (on the bus queue) is told when bluetoothd activated the monitor, or why the
    /// scan could not start; without it, a failure is logged.
    func startPassiveScan(
        services: [BluetoothUUID]?, options: ScanOptions, completion: (@Sendable (BluetoothError?) -> Void)?
    ) {
        guard let passive = options.passive else { return }
        let configuration = Self.monitorConfiguration(passive)
        busQueue.async {
            self.retirePassiveScan()
            self.scanGeneration += 1
            self.scan = ScanState(services: services.flatMap { $0.isEmpty ? nil : Set($0) }, options: options)
            self.passiveScan = PassiveSession(
                generation: self.scanGeneration, configuration: configuration, completion: completion)
        }
        inDiscoveryOrder {
            // The newest passive scan not yet started, if it is still wanted.
            guard let session = self.passiveScan, !session.started else { return }
            self.passiveScan?.started = true
            // An active scan of ours ends: the monitor replaces it.
            if !self.backgroundDiscovery { try? await self.client.stopDiscovery() }
            if let failure = await self.registerMonitor(session.configuration, generation: session.generation) {
                self.passiveScanFailed(failure, generation: session.generation)
            }
        }
    }

    /// Exports and registers the monitor of the session of `generation`; returns why it could not.
    private func registerMonitor(_ configuration: BlueZAdvertisementMonitor.Configuration, generation: Int) async
        -> BluetoothError?
    {
        guard let adapter = client.adapter else {
            return BluetoothError(.bluetoothUnavailable, message: "bluetoothd has no adapter for this manager")
        }
        guard let support = client.advertisementMonitorSupport else {
            return BluetoothError(.advertisementMonitorUnavailable)
        }
        guard support.supportsPatterns else {
            return BluetoothError(
                .operationNotSupported,
                message: "bluetoothd offers no or_patterns monitors (it offers \(support.monitorTypes))")
        }
        let monitor: BlueZAdvertisementMonitor
        do throws(BlueZError) {
            monitor = try await BlueZAdvertisementMonitor(client: client, configuration: configuration) {
                [weak self] event in
                self?.monitorEvent(event, generation: generation)
            }
        } catch {
            return BluetoothError(.unknown, message: error.description, underlying: error)
        }
        // Retired meanwhile (stopped or replaced): nothing to register.
        guard passiveScan?.generation == generation else {
            await monitor.unregister(from: nil)
            return nil
        }
        // Kept before registering: retiring the session now unregisters it after this.
        passiveScan?.monitor = monitor
        passiveScan?.adapter = adapter
        do throws(BlueZError) {
            try await monitor.register(on: adapter)
        } catch {
            guard passiveScan?.generation == generation else { return nil }
            passiveScan?.monitor = nil
            await monitor.unregister(from: nil)
            if error.code == .unknownObject {
                return BluetoothError(.advertisementMonitorUnavailable, underlying: error)
            }
            let code: BluetoothError.Code = error.code == .invalidArguments ? .invalidParameters : .unknown
            return BluetoothError(code, message: "RegisterMonitor failed: \(error.description)", underlying: error)
        }
        return nil
    }

    /// Ends the passive scan, if one runs (on the bus queue): a caller waiting for it is told,
    /// and its monitor is unregistered in discovery order (`UnregisterMonitor`; bluetoothd calls
    /// `Release`), then its objects go.
    func retirePassiveScan() {
        guard let session = passiveScan else { return }
        passiveScan = nil
        session.completion?(BluetoothError(.operationCancelled, message: "the scan was stopped or replaced"))
        guard let monitor = session.monitor else { return }
        inDiscoveryOrder { await monitor.unregister(from: session.adapter) }
    }

    private func monitorEvent(_ event: BlueZAdvertisementMonitor.Event, generation: Int) {
        guard let session = passiveScan, session.generation == generation else { return }
        switch event {
        case .activated:
            passiveScan?.activated = true
            passiveScan?.completion = nil
            session.completion?(nil)
        case .released:
            // Before `Activate`: bluetoothd refused the monitor (it logs why).
            guard !session.activated else { return }
            passiveScanFailed(
                BluetoothError(
                    .invalidParameters,
                    message: "bluetoothd refused the advertisement monitor (Release before Activate)"),
                generation: generation)
        case .deviceFound(let id):
            passiveScan?.found.insert(id)
            if let device = client.device(id) { advertised(id, device) }
        case .deviceLost(let id):
            passiveScan?.found.remove(id)
            // Found again later: reported again.
            scan?.reported[id] = nil
        }
    }

    /// Whether an advertisement of `id` may be reported by the running scan: always for an
    /// active one; for a passive one once bluetoothd found the device (on the bus queue).
    func passiveScanAdmits(_ id: DeviceID) -> Bool {
        scan?.options.passive == nil || passiveScan?.found.contains(id) == true
    }

    /// bluetoothd or the adapter went away: a caller waiting for the monitor is told; the
    /// monitor is unregistered when the scan resumes or stops.
    func passiveScanInterrupted() {
        guard let completion = passiveScan?.completion else { return }
        passiveScan?.completion = nil
        completion(BluetoothError(.bluetoothUnavailable, message: "bluetoothd or the adapter went away"))
    }

    /// bluetoothd forgot a device: a monitor reports it again when it comes back.
    func passiveDeviceRemoved(_ id: DeviceID) {
        passiveScan?.found.remove(id)
    }

    private func passiveScanFailed(_ error: BluetoothError, generation: Int) {
        guard let session = passiveScan, session.generation == generation else { return }
        let monitor = session.monitor
        passiveScan = nil
        scan = nil
        if let completion = session.completion {
            completion(error)
        } else {
            BlueZLog.warning("passive scan could not start: \(error)")
        }
        if generation == scanGeneration { manager?.passiveScanEnded() }
        if let monitor { onBusQueue { await monitor.unregister(from: nil) } }
    }

    static func monitorConfiguration(_ passive: PassiveScan) -> BlueZAdvertisementMonitor.Configuration {
        let rssi = passive.rssiThresholds
        return BlueZAdvertisementMonitor.Configuration(
            patterns: passive.patterns.map {
                BlueZAdvertisementMonitor.Pattern(offset: UInt8($0.offset), adType: $0.adType, content: Array($0.bytes))
            },
            rssiHighThreshold: rssi.map { Int16($0.highThreshold) },
            rssiHighTimeout: rssi.map { UInt16($0.highTimeout) },
            rssiLowThreshold: rssi.map { Int16($0.lowThreshold) }, rssiLowTimeout: rssi.map { UInt16($0.lowTimeout) },
            rssiSamplingPeriod: rssi?.samplingPeriod.map(UInt16.init))
    }
}
