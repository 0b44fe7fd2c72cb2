import Foundation
import TestSupport
import Testing

/// The seeded interleaving tester (issue 36): fixed seeds in the fast tier, new ones with
/// `Scripts/soak` (`BLUEZKIT_SOAK_SECONDS`).
@Suite(.timeLimit(.minutes(2))) struct InterleavingTests {
    struct Seed: Sendable, CustomTestStringConvertible {
        let seed: UInt64
        let profile: InterleavingProfile
        /// The issue-36 bug this seed found on the code before its fix, and the invariant it broke.
        let knownIssue: (bug: String, invariant: InterleavingInvariant)?

        init(_ seed: UInt64, _ profile: InterleavingProfile, knownIssue: (String, InterleavingInvariant)? = nil) {
            self.seed = seed
            self.profile = profile
            self.knownIssue = knownIssue
        }

        var testDescription: String { "seed \(seed) \(profile)" + (knownIssue.map { " (\($0.bug.prefix(17)))" } ?? "") }
    }

    /// Seeds that break no invariant, one or more per profile (shrinks are cheap when they hold).
    static let holding: [Seed] = [
        Seed(3, .mixed), Seed(4, .mixed), Seed(100, .cancellation), Seed(1, .advertising), Seed(2, .advertising),
        Seed(1, .notifySockets), Seed(2, .notifySockets), Seed(7, .writes), Seed(10, .writes), Seed(403, .release),
        Seed(404, .release),
    ]

    /// Seeds that found issue 36's bugs 1-5 on the code before their fixes (06aa4e0: each broke
    /// the invariant named, with the minimal replay in its comment), and hold since the fixes.
    static let foundIssue36Bugs: [Seed] = [
        // disconnect(from:); sensor out of range; connect(to:) in a cancelled task.
        Seed(205, .cancellation, knownIssue: ("issue 36 bug 1: connect(to:) in a cancelled task", .callEnds)),
        // RegisterAdvertisement answered late; startAdvertising; stopAdvertising.
        Seed(10, .mixed, knownIssue: ("issue 36 bug 2: stopAdvertising while registering", .advertisingAgrees)),
        // add; centrals subscribe; central 0's socket stalls; updateValue until refused; its link drops.
        Seed(24, .notifySockets, knownIssue: ("issue 36 bug 3: a full socket's link closed", .updateValueLive)),
        // discoveries(); release the central manager.
        Seed(2, .mixed, knownIssue: ("issue 36 bug 4: discoveries() after release", .releaseEnds)),
        // connect, discover, notifications(of:); release the central manager.
        Seed(6, .release, knownIssue: ("issue 36 bug 4: notifications(of:) after release", .releaseEnds)),
        // requests(); release the peripheral manager.
        Seed(1, .release, knownIssue: ("issue 36 bug 4: requests() after release", .releaseEnds)),
        // connect, discover; two writes at once, the first answered ATT 0x0E, the second ok.
        Seed(6, .writes, knownIssue: ("issue 36 bug 5: write results to the wrong caller", .ownResult)),
    ]

    /// Seeds that found bugs after issue 36, on the code before their fixes, and hold since.
    static let foundLater: [Seed] = [
        // RegisterApplication answered late; the next one fails; add; bluetoothd restarts: the
        // add ended without error (bluetoothd left under it), its registration to the new
        // bluetoothd failed, and nothing registered it again (59e7840).
        Seed(
            55, .notifySockets,
            knownIssue: ("republish: a failed registration was never made again", .advertisingAgrees)),
        // add; ...; RegisterApplication answered late; remove, add, add, remove: remove changed
        // the services at once while the adds waited behind the slow registration, so the
        // service stayed published after the app's last call removed it (25ec43e, soak).
        Seed(
            9022, .notifySockets,
            knownIssue: ("remove overtaken by an add waiting for its turn", .advertisingAgrees)),
    ]

    /// Seeds that crashed the test process on the code before a fix, and hold since.
    static let crashedBefore: [Seed] = [
        // connect, discover, power cycle, writeValue(.withoutResponse) x2; the world's teardown
        // releases the central manager with a write in flight: the closed connection failed it,
        // and its completion sent the waiting write again and again (59e7840, a segfault after
        // about 1,165 warnings, seen by the soak while seed 517 ran).
        Seed(516, .cancellation)
    ]

    /// How many replays a fixed seed's failure is shrunk with (each failing replay waits out a bound).
    static let fixedShrinkAttempts = 6

    @Test(arguments: holding) func seedHolds(_ seed: Seed) async throws {
        let finding = try await InterleavingRunner.check(
            seed: seed.seed, profile: seed.profile, shrinkAttempts: Self.fixedShrinkAttempts)
        if let finding { Issue.record(Comment(rawValue: finding.report)) }
    }

    @Test(arguments: foundIssue36Bugs) func aSeedThatFoundAnIssue36BugHolds(_ seed: Seed) async throws {
        let known = try #require(seed.knownIssue)
        let finding = try await InterleavingRunner.check(
            seed: seed.seed, profile: seed.profile, shrinkAttempts: Self.fixedShrinkAttempts)
        if let finding { Issue.record(Comment(rawValue: "\(known.bug) is back:\n\(finding.report)")) }
    }

    @Test(arguments: foundLater) func aSeedThatFoundALaterBugHolds(_ seed: Seed) async throws {
        let known = try #require(seed.knownIssue)
        let finding = try await InterleavingRunner.check(
            seed: seed.seed, profile: seed.profile, shrinkAttempts: Self.fixedShrinkAttempts)
        if let finding { Issue.record(Comment(rawValue: "\(known.bug) is back:\n\(finding.report)")) }
    }

    /// Each seed runs twice: its crash came after the run, from the managers its world released
    /// at the end, while the next run went on (the process may exit before it, after one run).
    @Test(arguments: crashedBefore) func aSeedThatCrashedTheProcessHolds(_ seed: Seed) async throws {
        for _ in 0..<2 {
            let finding = try await InterleavingRunner.check(
                seed: seed.seed, profile: seed.profile, shrinkAttempts: Self.fixedShrinkAttempts)
            if let finding { Issue.record(Comment(rawValue: finding.report)) }
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

    /// What a finding breaks and how, without the numbers (tags, generations, counts) that vary.
    static func signature(_ finding: InterleavingRunner.Finding) -> String {
        let lines = finding.report.split(separator: "\n")
        let detail = lines.count > 2 ? String(lines[2]) : ""
        return finding.invariant.rawValue + "|" + String(detail.filter { !$0.isNumber }.prefix(120))
    }
}

/// `Scripts/soak`: its own suite, so that its own time limit holds (a suite's limit, such as
/// ``InterleavingTests``' two minutes, caps its tests' limits).
@Suite struct InterleavingSoak {
    /// `Scripts/soak`: new seeds until `BLUEZKIT_SOAK_SECONDS` pass, from `BLUEZKIT_SOAK_FROM_SEED`.
    @Test(
        .enabled(if: ProcessInfo.processInfo.environment["BLUEZKIT_SOAK_SECONDS"] != nil),
        .timeLimit(.minutes(60)))
    func soak() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = Int(environment["BLUEZKIT_SOAK_SECONDS"] ?? "") ?? 60
        var seed = UInt64(environment["BLUEZKIT_SOAK_FROM_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970)
        let deadline = ContinuousClock.now + .seconds(seconds)
        let shrinkAttempts = Int(environment["BLUEZKIT_SOAK_SHRINK"] ?? "") ?? 12
        let profiles = InterleavingProfile.allCases.filter { profile in
            environment["BLUEZKIT_SOAK_PROFILE"].map { $0.split(separator: ",").contains(Substring(profile.rawValue)) }
                ?? true
        }
        var runs = 0
        var failures = 0
        var seen: Set<String> = []
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
                // A failure like one seen already (same invariant and evidence, numbers aside) is
                // reported without its shrink, which costs many replays: the soak moves on.
                var finding = try await InterleavingRunner.check(seed: seed, profile: profile, shrinkAttempts: 0)
                if let found = finding, seen.insert(InterleavingTests.signature(found)).inserted {
                    finding = try await InterleavingRunner.check(
                        seed: seed, profile: profile, shrinkAttempts: shrinkAttempts)
                }
                if let report = finding?.report {
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
