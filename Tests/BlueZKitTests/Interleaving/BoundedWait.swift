import TestSupport

/// Bounded waits for an interleaving run: poll a condition every 5 ms until it holds or the
/// bound (times ``TestTime/scale``) runs out. They return false rather than record an issue: a
/// run reports one violation, with its seed and replay, and the shrinker replays failing runs.
enum BoundedWait {
    /// How long an invariant may take to hold after the run made it due (scaled).
    static let invariant = Duration.seconds(2)

    static func poll(_ bound: Duration, scaled: Bool = true, _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + (scaled ? TestTime.scaled(bound) : bound)
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return await condition()
    }

    /// Lets what a step started run for `pace` (unscaled), or less when `done` holds sooner: the
    /// pace of a run, never what an invariant depends on.
    static func pace(_ pace: Duration, until done: () async -> Bool = { false }) async {
        _ = await poll(pace, scaled: false, done)
    }
}
