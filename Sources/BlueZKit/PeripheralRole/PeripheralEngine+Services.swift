import BlueZ
import Foundation

/// Publishing the added services: which applications are wanted (the layouts of
/// `PeripheralManager+IncludedServices.swift`), registered and unregistered. The engine's work,
/// on the chain of service changes (`changes`), on the bus queue.
extension PeripheralEngine {
    /// Adds `service` to the added services and publishes what that changes; returns the error
    /// for `didAdd`, if any. On the chain of service changes.
    func addToLayout(_ service: MutableService) async -> (any Error)? {
        if PeripheralManager.includeOrder(of: service, excluding: []).cycle {
            return BluetoothError(
                .invalidParameters, message: "\(service) includes itself through its included services")
        }
        let wasAdded = sync { state in
            state.inclusion.removed.remove(ObjectIdentifier(service))
            if state.services.contains(where: { $0 === service }) { return true }
            state.services.append(service)
            return false
        }
        let failures = await reconcileApplications()
        guard let failure = failures.first(where: { $0.layout.services.contains { $0 === service } }) else {
            return nil
        }
        if PeripheralManager.interruptedByBluetoothdOrBus.contains(failure.error.code) {
            // bluetoothd or the bus went away while registering: the service stays added and is
            // published with the others when they are back (the state says `.resetting` meanwhile:
            // their leaving marked every registration lost).
            return nil
        }
        if !wasAdded {
            // Not published: give back what it took (included services' own applications).
            sync { state in state.services.removeAll { $0 === service } }
            _ = await reconcileApplications()
        }
        return BluetoothError(.unknown, message: failure.error.description, underlying: failure.error)
    }

    /// Unregisters the applications that are no longer wanted as they are, then registers the
    /// wanted ones that are missing. Returns the registrations that failed (also logged); they
    /// are attempted again later (see `PeripheralManager+PublishRetry`).
    func reconcileApplications() async -> [(layout: PeripheralManager.ApplicationLayout, error: BlueZError)] {
        let failures = await registerWantedApplications()
        publishingEnded(with: failures)
        return failures
    }

    private func registerWantedApplications() async
        -> [(layout: PeripheralManager.ApplicationLayout, error: BlueZError)]
    {
        let (wanted, stale, client) = sync { state in
            state.inclusion.removed = PeripheralManager.stillIncluded(state.inclusion.removed, by: state.services)
            let wanted = PeripheralManager.layouts(for: state.services, excluding: state.inclusion.removed)
            var stale: [BlueZGattApplication] = []
            for (host, application) in state.applications {
                let current = state.inclusion.layouts[host]
                if current == nil || !wanted.contains(where: { $0 == current }),
                    !stale.contains(where: { $0 === application })
                {
                    stale.append(application)
                }
            }
            // An application published for several services goes as a whole: the services it
            // held that are still wanted are published again.
            for (host, application) in state.applications where stale.contains(where: { $0 === application }) {
                state.applications[host] = nil
                state.inclusion.layouts[host] = nil
            }
            return (wanted.filter { state.applications[ObjectIdentifier($0.host)] == nil }, stale, state.client)
        }
        if !stale.isEmpty {
            let adapter = await adapterPath(client)
            for application in stale { await application.unregister(from: adapter) }
        }
        if wanted.count > 1 {
            // Together, as one change of bluetoothd's database (see `register`); one at a time
            // if that fails, so that each failure is told to the service it belongs to.
            do throws(BlueZError) {
                try await register(wanted)
                return []
            } catch {
                BlueZLog.debug("publishing \(wanted.count) services together failed (\(error)); one at a time")
            }
        }
        var failures: [(layout: PeripheralManager.ApplicationLayout, error: BlueZError)] = []
        for layout in wanted {
            do throws(BlueZError) {
                try await register([layout])
            } catch {
                BlueZLog.warning("could not publish \(layout.host): \(error)")
                failures.append((layout, error))
            }
        }
        return failures
    }
}
