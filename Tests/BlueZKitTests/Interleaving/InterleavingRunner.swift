import Foundation

/// Runs a list of steps against a fresh world, checking the invariants after each step and once
/// quiesced; on a violation, shrinks the list and writes the report a failure prints.
enum InterleavingRunner {
    /// What a run found: the broken invariant and after which step (nil: when quiesced).
    struct Outcome: Sendable {
        let violation: InterleavingViolation
        let step: Int?
    }

    static func run(_ steps: [InterleavingStep]) async throws -> Outcome? {
        let world = try await InterleavingWorld.make()
        for (index, step) in steps.enumerated() {
            await world.perform(step)
            if let violation = world.checkAfterStep() {
                await world.tearDown()
                return Outcome(violation: violation, step: index)
            }
        }
        let outcome = await world.quiesce().map { Outcome(violation: $0, step: nil) }
        if ProcessInfo.processInfo.environment["BLUEZKIT_INTERLEAVING_TRACE"] != nil {
            print("interleaving trace:\n" + world.ledger.trace.map { "  " + $0 }.joined(separator: "\n"))
        }
        await world.tearDown()
        return outcome
    }

    /// A broken invariant and the report a failure prints.
    struct Finding: Sendable {
        let invariant: InterleavingInvariant
        let report: String
    }

    /// Runs `seed` under `profile`; on a violation, returns it with a report and a shrunk replay.
    static func check(seed: UInt64, profile: InterleavingProfile, shrinkAttempts: Int = 12) async throws -> Finding? {
        let steps = profile.steps(seed: seed)
        guard let outcome = try await run(steps) else { return nil }
        let invariant = outcome.violation.invariant
        // Steps after the failing one play no part.
        let prefix = outcome.step.map { Array(steps[...$0]) } ?? steps
        let shrunk = await StepShrinker.shrink(prefix, attempts: shrinkAttempts) { candidate in
            (try? await run(candidate))?.violation.invariant == invariant
        }
        return Finding(
            invariant: invariant,
            report: report(seed: seed, profile: profile, outcome: outcome, steps: steps, replay: shrunk))
    }

    static func report(
        seed: UInt64, profile: InterleavingProfile, outcome: Outcome, steps: [InterleavingStep],
        replay: [InterleavingStep]
    ) -> String {
        let when = outcome.step.map { "after step \($0 + 1) of \(steps.count)" } ?? "once quiesced"
        var lines = [
            "interleaving seed \(seed) (profile \(profile)) broke an invariant \(when):",
            "  \(outcome.violation.invariant.rawValue)", "  \(outcome.violation.detail)",
            "minimal replay (\(replay.count) of \(steps.count) steps), then quiesce:",
        ]
        lines += replay.enumerated().map { "  \($0.offset + 1). \($0.element)" }
        return lines.joined(separator: "\n")
    }
}
