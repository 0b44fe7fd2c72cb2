import Testing

/// The run's model of the app's last call follows the order the library sees the calls in.
@Suite(.timeLimit(.minutes(1))) struct InterleavingLaunchTests {
    /// An `addService` a step does not wait for is made at its step: a `remove(_:)` in the next
    /// step reaches the manager after it, so bluetoothd ends up without the service, as the
    /// model (the app's last call: remove) says. With the call's task merely enqueued, the remove
    /// came first whenever the executor had not run the task yet (here: always, as the step
    /// returns at once), the add then published the service, and quiesce reported a broken
    /// invariant that was the tester's own (seed 2, profile advertising, once under TSan).
    @Test func anAddNotWaitedForComesBeforeTheNextStepsRemove() async throws {
        for attempt in 1...3 {
            let world = try await InterleavingWorld.make()
            guard let (manager, _) = await world.ensurePeripheralManager(), let service = world.service else {
                await world.tearDown()
                Issue.record("the peripheral manager did not power on")
                return
            }
            world.serviceWanted = true
            await world.launch("peripheralManager.addService", role: .peripheral, cancel: .never, pace: .zero) {
                try await manager.addService(service)
                return "added"
            }
            await world.performPeripheral(.removeService)
            let violation = await world.quiesce()
            await world.tearDown()
            #expect(violation == nil, "attempt \(attempt): \(violation.map { "\($0)" } ?? "")")
        }
    }
}
