import Foundation

/// How much longer than usual the tests' waits for something to happen may last.
///
/// `BLUEZKIT_TEST_TIME_SCALE` (a number, at least 1; 1 when unset). `Scripts/test` sets it for
/// the run under ThreadSanitizer, which makes everything several times slower while the whole
/// fast tier runs at once on two cores: there a 10 s wait for a manager to power on can run out.
/// Only upper bounds are scaled (how long to wait for a condition, a signal, a datagram), never
/// what a test asserts, so a test that passes with the scale checks what it checks without it.
public enum TestTime {
    /// The factor, read once from the environment.
    public static let scale: Double = {
        guard let text = ProcessInfo.processInfo.environment["BLUEZKIT_TEST_TIME_SCALE"],
            let value = Double(text), value.isFinite, value >= 1
        else { return 1 }
        return value
    }()

    /// `duration` times ``scale``.
    public static func scaled(_ duration: Duration) -> Duration { duration * scale }
}
