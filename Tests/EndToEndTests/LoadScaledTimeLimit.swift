import TestSupport
import Testing

extension Trait where Self == TimeLimitTrait {
    /// A time limit of `minutes`, times the load factor the tier's waits use.
    ///
    /// Every wait inside an end-to-end test is scaled by ``TestTime/scale`` (2 in
    /// `Scripts/test-e2e`), so a fixed limit could end a test before one of its own waits had run
    /// out: CI (2026-12-06, three guests on two cores) stopped `valuesFlowAgainAfterTheSystemBusRestarts`
    /// at its 4 minutes while its 150 s wait, scaled to 300 s, still ran, and printed no
    /// diagnostics of the wait. The limit stays a backstop above the waits, rounded up to whole
    /// minutes (Swift Testing's granularity).
    static func loadScaledTimeLimit(minutes: Int) -> Self {
        .timeLimit(.minutes(Int((Double(minutes) * TestTime.scale).rounded(.up))))
    }
}
