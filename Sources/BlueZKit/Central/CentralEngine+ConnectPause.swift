import BlueZ
import Dispatch

/// Connecting while the app's scan runs.
///
/// Linux does not start an LE connection while a discovery runs: the kernel adds the device to
/// its pending connections and waits for an advertising report from it. A controller that
/// filters duplicate reports (btvirt, and controllers that do so strictly) reported the device
/// when the scan began and reports it again only when scanning is switched on anew, which a
/// discovery does when it ends: after 10.24 s. Once discovery stops, the kernel scans for the
/// device alone and connects within the first report.
///
/// So an attempt made while our discovery session runs stops the session first, and starts it
/// again (same filter, same scan) when the attempt ends, or after ``connectPauseLimit`` if it
/// has not by then; a pause starts ``connectPauseSpacing`` after the last one ended at the
/// earliest: the app's scan keeps running as far as the app can tell (Core Bluetooth's
/// scan is not stopped by `connect` either), with a gap in its reports of about the time the
/// link takes. Other programs' discovery sessions are not ours: while one runs, bluetoothd
/// keeps discovering and the connection waits as before.
extension CentralEngine {
    /// The pause of our discovery for connection attempts. Queue-confined.
    struct ConnectPause {
        /// The devices whose attempts the discovery is paused for.
        var devices: Set<DeviceID> = []
        /// Our `StopDiscovery` while paused; an attempt's `Connect` waits for it.
        var stopping: Task<Void, Never>?
        /// Ends the pause after ``CentralEngine/connectPauseLimit`` whatever the attempts do.
        var limit: (any DispatchSourceTimer)?
        /// When the last pause ended: the next starts ``CentralEngine/connectPauseSpacing`` later at
        /// the earliest.
        var resumedAt: ContinuousClock.Instant?
        var isPaused: Bool { stopping != nil }
    }

    /// The longest a connection attempt keeps the app's scan paused: a device that is away makes
    /// its attempts last until the kernel gives up (many seconds), and the scan must not stall
    /// for that long. After the limit the scan runs again and the attempt goes on as it would
    /// have without the pause.
    static let connectPauseLimit: Duration = .seconds(2)

    /// The shortest time between the end of one pause and the start of the next. A device that
    /// advertises but refuses the link would otherwise have our discovery stopped and started
    /// over and over: each start reports it again, and its report starts the next attempt.
    static let connectPauseSpacing: Duration = .seconds(1)

    /// Pauses our discovery for an attempt to connect to `id`, if the app's scan runs as a
    /// discovery session of ours; returns what the attempt's `Connect` waits for (on the queue).
    func pauseDiscovery(for id: DeviceID) -> Task<Void, Never>? {
        guard scan != nil, scan?.options.passive == nil else { return nil }
        if let stopping = connectPause.stopping {
            connectPause.devices.insert(id)
            return stopping
        }
        if let resumedAt = connectPause.resumedAt, ContinuousClock.now - resumedAt < Self.connectPauseSpacing {
            return nil
        }
        connectPause.devices.insert(id)
        let timer = DispatchSource.makeTimerSource(queue: busQueue)
        timer.schedule(deadline: .now() + Self.connectPauseLimit.dispatchInterval)
        timer.setEventHandler { [weak self] in self?.resumeDiscovery() }
        connectPause.limit = timer
        timer.resume()
        let stopping = inDiscoveryOrder {
            BlueZLog.debug("discovery paused for a connection attempt")
            do throws(BlueZError) { try await self.client.stopDiscovery() } catch {
                BlueZLog.debug("StopDiscovery (pause): \(error)")
            }
        }
        connectPause.stopping = stopping
        return stopping
    }

    /// The attempt to connect to `id` ended: the last one to end resumes the discovery (on the queue).
    func connectAttemptEnded(_ id: DeviceID) {
        guard connectPause.devices.remove(id) != nil, connectPause.devices.isEmpty else { return }
        resumeDiscovery()
    }

    /// Ends the pause: the app's scan, if it is still the one that was paused, discovers again
    /// with its filter (on the queue).
    func resumeDiscovery() {
        guard connectPause.isPaused else { return }
        connectPause.limit?.cancel()
        connectPause = ConnectPause(resumedAt: .now)
        let generation = scanGeneration
        inDiscoveryOrder {
            // A scan started meanwhile started its own discovery; a stopped one wants none.
            guard self.scanGeneration == generation, let scan = self.scan, scan.options.passive == nil else { return }
            BlueZLog.debug("discovery resumed after a connection attempt")
            do throws(BlueZError) {
                try await self.startDiscovery(services: scan.services.map(Array.init), options: scan.options)
            } catch  where error.code == .inProgress || error.code == .disconnected {
                // Discovering already, or the manager was released.
            } catch {
                BlueZLog.warning("scan could not resume after a connection attempt: \(error)")
            }
        }
    }
}
