import Foundation
import Testing

/// The seeded interleaving tester (issue 36): fixed seeds in the fast tier, new ones with
/// `Scripts/soak` (`BLUEZKIT_SOAK_SECONDS`).
@Suite(.timeLimit(.minutes(2))) struct InterleavingTests {
    struct Seed: Sendable, CustomTestStringConvertible {
        let seed: UInt64
        let profile: InterleavingProfile
        /// The issue-36 bug this seed finds on the code before its fix, if any.
        let knownIssue: String?

        init(_ seed: UInt64, _ profile: InterleavingProfile, knownIssue: String? = nil) {
            self.seed = seed
            self.profile = profile
            self.knownIssue = knownIssue
        }

        var testDescription: String { "\(seed) \(profile)" + (knownIssue.map { " (\($0.prefix(18)))" } ?? "") }
    }

    /// Seeds that break no invariant, one or more per profile.
    static let holding: [Seed] = []

    /// Seeds that find issue 36's bugs. Each check is a known issue until its fix lands: then
    /// "known issue was not recorded" fails the test, and the wrapper goes.
    static let findingIssue36: [Seed] = []

    @Test(arguments: holding) func seedHolds(_ seed: Seed) async throws {
        if let report = try await InterleavingRunner.check(seed: seed.seed, profile: seed.profile) {
            Issue.record(Comment(rawValue: report))
        }
    }

    @Test(arguments: findingIssue36) func seedFindsIssue36Bug(_ seed: Seed) async throws {
        let report = try await InterleavingRunner.check(seed: seed.seed, profile: seed.profile)
        withKnownIssue(Comment(rawValue: seed.knownIssue ?? "")) {
            if let report { Issue.record(Comment(rawValue: report)) }
        }
    }

    @Test func aSeedFixesItsSteps() {
        var first = SplitMix64(seed: 42)
        var second = SplitMix64(seed: 42)
        #expect((0..<8).map { _ in first.next() } == (0..<8).map { _ in second.next() })
        // SplitMix64's published first output for seed 0.
        var zero = SplitMix64(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
        for profile in InterleavingProfile.allCases {
            #expect(profile.steps(seed: 7) == profile.steps(seed: 7), "\(profile)")
            #expect(profile.steps(seed: 7) != profile.steps(seed: 8), "\(profile)")
        }
    }

    @Test func theShrinkerKeepsOnlyWhatFails() async {
        // Fails when a start is followed, later, by a stop: the minimal list is those two steps.
        let steps: [InterleavingStep] = [
            .scan, .addService, .startAdvertising, .pause(milliseconds: 5), .updateValue(count: 3), .stopScan,
            .stopAdvertising, .restartBluetoothd, .connect,
        ]
        let calls = Calls()
        let shrunk = await StepShrinker.shrink(steps, attempts: 100) { candidate in
            calls.count += 1
            guard let start = candidate.firstIndex(of: .startAdvertising) else { return false }
            return candidate[start...].contains(.stopAdvertising)
        }
        #expect(shrunk == [.startAdvertising, .stopAdvertising])
        #expect(calls.count <= 100)
        // A bounded number of attempts returns what it has so far, still failing.
        let partial = await StepShrinker.shrink(steps, attempts: 2) { candidate in
            guard let start = candidate.firstIndex(of: .startAdvertising) else { return false }
            return candidate[start...].contains(.stopAdvertising)
        }
        #expect(partial.contains(.startAdvertising) && partial.contains(.stopAdvertising))
    }

    final class Calls { var count = 0 }

    /// `Scripts/soak`: new seeds until `BLUEZKIT_SOAK_SECONDS` pass, from `BLUEZKIT_SOAK_FROM_SEED`.
    @Test(
        .enabled(if: ProcessInfo.processInfo.environment["BLUEZKIT_SOAK_SECONDS"] != nil),
        .timeLimit(.minutes(60)))
    func soak() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = Int(environment["BLUEZKIT_SOAK_SECONDS"] ?? "") ?? 60
        var seed = UInt64(environment["BLUEZKIT_SOAK_FROM_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970)
        let deadline = ContinuousClock.now + .seconds(seconds)
        let shrinkAttempts = Int(environment["BLUEZKIT_SOAK_SHRINK"] ?? "") ?? 24
        let profiles = InterleavingProfile.allCases.filter { profile in
            environment["BLUEZKIT_SOAK_PROFILE"].map { $0.split(separator: ",").contains(Substring(profile.rawValue)) }
                ?? true
        }
        var runs = 0
        var failures = 0
        while ContinuousClock.now < deadline {
            for profile in profiles where ContinuousClock.now < deadline {
                runs += 1
                let started = ContinuousClock.now
                // Unbuffered, so that a crash still names its seed.
                FileHandle.standardError.write(Data("soak: seed \(seed) \(profile) starts\n".utf8))
                if environment["BLUEZKIT_SOAK_PRINT_STEPS"] != nil {
                    print("soak: seed \(seed) \(profile) steps:")
                    for step in profile.steps(seed: seed) { print("  \(step)") }
                }
                if let report = try await InterleavingRunner.check(
                    seed: seed, profile: profile, shrinkAttempts: shrinkAttempts)
                {
                    failures += 1
                    print("SOAK FAILURE\n\(report)\n")
                    Issue.record(Comment(rawValue: report))
                } else {
                    print("soak: seed \(seed) \(profile) held (\(ContinuousClock.now - started))")
                }
            }
            seed &+= 1
        }
        print("soak: \(runs) runs, \(failures) failed; next seed \(seed)")
    }
}
