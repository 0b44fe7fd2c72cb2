import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport

/// The invariants: cheap ones after each step, all of them once the run quiesced.
extension InterleavingWorld {
    /// A broken invariant that shows without waiting: one the ledger heard of (results, delegate
    /// order), or a call that has not ended long after its task was cancelled.
    func checkAfterStep() -> InterleavingViolation? {
        if let violation = ledger.violation { return violation }
        if let overdue = ledger.overdueAfterCancel(bound: TestTime.scaled(BoundedWait.invariant)).first {
            return InterleavingViolation(
                invariant: .callEnds, detail: "\(overdue.what): cancelled, still waiting after \(BoundedWait.invariant)"
            )
        }
        return nil
    }

    /// Ends the faults, then checks, in order: that what released managers leave ends by itself;
    /// that every call ends once cancelled; that advertising and services agree with bluetoothd
    /// and the app; that `updateValue` goes out again.
    func quiesce() async -> InterleavingViolation? {
        bluez.clearFaults()
        for index in centralModels.indices where centralModels[index].stalled {
            centrals[index].resumeNotifySockets()
            centralModels[index].stalled = false
        }
        if let violation = await releasedManagersLeaveNothingOpen() { return violation }
        for (id, task) in calls {
            task.cancel()
            ledger.cancelled(id)
        }
        if !(await BoundedWait.poll(BoundedWait.invariant) { ledger.openCalls.isEmpty }) {
            let open = ledger.openCalls.map(\.what).joined(separator: "; ")
            return InterleavingViolation(invariant: .callEnds, detail: "cancelled at the end, still waiting: \(open)")
        }
        if let violation = await releasedManagersLeaveNothingOpen() { return violation }
        if let violation = await advertisingAgrees() { return violation }
        if let violation = await updateValueGoesOut() { return violation }
        return ledger.violation
    }

    /// Every call and stream of a released manager that is gone (deallocated) ends by itself.
    private func releasedManagersLeaveNothingOpen() async -> InterleavingViolation? {
        let released =
            releasedCentrals.map { (CallLedger.Role.central, $0.generation, $0.manager) }
            + releasedPeripheralManagers.map { (CallLedger.Role.peripheral, $0.generation, $0.manager) }
        for (role, generation, manager) in released {
            guard await BoundedWait.poll(.milliseconds(500), { manager.object == nil }) else { continue }
            if !(await BoundedWait.poll(BoundedWait.invariant) {
                ledger.open(role: role, generation: generation).isEmpty
            }) {
                let open = ledger.open(role: role, generation: generation).map(\.what).joined(separator: "; ")
                return InterleavingViolation(
                    invariant: .releaseEnds, detail: "\(role) manager #\(generation) is gone; still open: \(open)")
            }
        }
        return nil
    }

    /// Registrations of the current peripheral manager that bluetoothd holds.
    private func ownAdvertisements() -> Int {
        bluez.adapters.first?.registeredAdvertisements.filter { !foreignOwners.contains($0.owner) }.count ?? 0
    }

    private func ownServicePublished() -> Bool {
        let applications = bluez.adapters.first?.registeredApplications.filter { !foreignOwners.contains($0.owner) }
        return (applications ?? []).contains { application in
            application.serviceUUIDs.contains { $0.lowercased() == Self.serviceUUID || $0.lowercased() == "abcd" }
        }
    }

    private func advertisingAgrees() async -> InterleavingViolation? {
        guard let manager = peripheralManager, manager.state == .poweredOn else { return nil }
        let log = peripheralRecorder?.recentCalls.joined(separator: "; ") ?? ""
        let agreed: Bool
        if advertisingWanted == false {
            agreed = await BoundedWait.poll(BoundedWait.invariant) {
                !manager.isAdvertising && ownAdvertisements() == 0
            }
        } else {
            agreed = await BoundedWait.poll(BoundedWait.invariant) {
                manager.isAdvertising == (ownAdvertisements() > 0)
            }
        }
        if !agreed {
            let last = advertisingWanted.map { $0 ? "startAdvertising" : "stopAdvertising" } ?? "none"
            return InterleavingViolation(
                invariant: .advertisingAgrees,
                detail:
                    "the app's last call: \(last); isAdvertising \(manager.isAdvertising); bluetoothd holds "
                    + "\(ownAdvertisements()) advertisement(s) of it (delegate: \(log))")
        }
        guard let service, peripheralRecorder?.isAdded(service) == true || !serviceWanted else { return nil }
        if !(await BoundedWait.poll(BoundedWait.invariant) { ownServicePublished() == serviceWanted }) {
            return InterleavingViolation(
                invariant: .advertisingAgrees,
                detail:
                    "the app's last call: \(serviceWanted ? "add" : "remove") of service ABCD; bluetoothd "
                    + "\(ownServicePublished() ? "holds" : "does not hold") it (delegate: \(log))")
        }
        return nil
    }

    /// With every subscribed central able to take values, `updateValue` is accepted again soon.
    private func updateValueGoesOut() async -> InterleavingViolation? {
        guard let manager = peripheralManager, manager.state == .poweredOn, let characteristic = notifyCharacteristic,
            let service, serviceWanted, peripheralRecorder?.isAdded(service) == true
        else { return nil }
        if !(await BoundedWait.poll(BoundedWait.invariant) {
            manager.updateValue(Data([0xEE]), for: characteristic, onSubscribedCentrals: nil)
        }) {
            let centrals = centralModels.enumerated().map { index, model in
                "central \(index): connected \(model.connected), subscribed \(model.subscribed), stalled \(model.stalled)"
            }
            let log = peripheralRecorder?.recentCalls.joined(separator: "; ") ?? ""
            return InterleavingViolation(
                invariant: .updateValueLive,
                detail:
                    "refused for \(BoundedWait.invariant) with no central stalled (\(centrals.joined(separator: "; "))); delegate: \(log)"
            )
        }
        return nil
    }
}
