import BlueZ
import Foundation

/// Registering again what a failed registration left unpublished.
///
/// A service the app was told was added (`didAdd` without error) stays added: when bluetoothd
/// came back and its registration fails there (or an application published for several
/// services is registered again without one of them, and that fails), nothing in Core
/// Bluetooth's model can take the `didAdd` back. So the registration is made again, a few times
/// with growing delays, while bluetoothd stays; it is made again also at the next change of
/// the services and whenever bluetoothd or the adapter comes back.
extension PeripheralEngine {
    /// What the engine keeps about those attempts (part of ``State``).
    struct PublishRetryState {
        /// Attempts made since a change of services last published everything wanted.
        var attempts = 0
        /// An attempt is scheduled.
        var isScheduled = false
    }

    /// The delays before each attempt, after the registration that failed: about half a minute
    /// in all, then the failure stays logged until the next change or bluetoothd's return.
    static let publishRetryDelays: [Duration] = [
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16),
    ]

    /// After a change of services (on the change chain) that left `failures`: schedules the next
    /// attempt, unless bluetoothd left (it is published again when back) or the attempts are spent.
    func publishingEnded(with failures: [(layout: PeripheralManager.ApplicationLayout, error: BlueZError)]) {
        let delay: Duration? = sync { state in
            guard !failures.isEmpty else {
                state.publishRetry.attempts = 0
                return nil
            }
            guard !state.registrationsLost, !state.publishRetry.isScheduled,
                !failures.contains(where: { PeripheralManager.interruptedByBluetoothdOrBus.contains($0.error.code) }),
                state.publishRetry.attempts < Self.publishRetryDelays.count
            else { return nil }
            defer { state.publishRetry.attempts += 1 }
            state.publishRetry.isScheduled = true
            return Self.publishRetryDelays[state.publishRetry.attempts]
        }
        guard let delay else {
            let spent = sync { $0.publishRetry.attempts >= Self.publishRetryDelays.count }
            if !failures.isEmpty, spent {
                BlueZLog.warning(
                    "gave up publishing \(failures.map { "\($0.layout.host)" }.joined(separator: ", ")) again "
                        + "until the services change or bluetoothd comes back: \(failures[0].error)")
            }
            return
        }
        busQueue.asyncAfter(deadline: .now() + delay.dispatchInterval) { [weak self] in
            self?.changes.enqueue { [weak self] in
                guard let self else { return }
                let lost = self.sync { state in
                    state.publishRetry.isScheduled = false
                    return state.registrationsLost
                }
                // bluetoothd left meanwhile: its return publishes everything.
                guard !lost else { return }
                _ = await self.reconcileApplications()
            }
        }
    }

    /// When bluetoothd or the adapter came back: the attempts start over.
    func resetPublishRetries() {
        sync { $0.publishRetry.attempts = 0 }
    }
}
