import Foundation
import Synchronization
import TestSupport
import Testing

/// The scope every end-to-end test runs in: whatever the test started is stopped when it ends,
/// on every path (a thrown error, a failed expectation, a time limit), so the next test starts
/// clean; no BlueZKit agent may have become bluetoothd's default unless the test asked
/// (``DefaultAgentCheck``); and when it failed, the programs' last lines and the part of bluetoothd's log written
/// during the test are printed under the test's name.
///
/// Applied to the suite with ``Trait/endToEndScope`` and ``Trait/endToEndFailures`` (the issue
/// handler that marks the running test failed; the suite is serialized, so one test runs at a
/// time).
struct EndToEndScope: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    /// Whether the running test recorded an issue.
    static let failed = Atomic<Bool>(false)

    /// Where the guest's bluetoothd writes its log (`Scripts/guest/vm-init`); a restarted
    /// bluetoothd appends to it too.
    static let bluetoothdLog = "/run/bluez-vm/bluetoothd.log"

    /// Lines of each program's output and of bluetoothd's log printed for a failed test.
    static let reportLines = 60
    static let logLines = 200
    /// Programs the harness runs to query the bus, whose output a report cuts to `briefLines`.
    static let briefTools: Set<String> = ["busctl", "dbus-daemon"]
    static let briefLines = 4

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let serial = RunningPrograms.lastSerial
        let knownCrashes = test.traits.compactMap { $0 as? KnownBluetoothdCrash } + KnownBluetoothdCrash.inAnyTest
        // bluetoothd can die just after the test that made it crash ended (its backtrace takes a
        // while to print in the guest): that crash is the previous test's, and this test gets a
        // running bluetoothd.
        if Bluetoothd.commandLine() == nil, let previous = Self.previousTest.withLock({ $0 }) {
            Self.recordBluetoothdGone(
                "bluetoothd is not running as \(test.name) starts: it died after \(previous.name) ended",
                log: Self.log(since: previous.logStart), knownCrashes: previous.knownCrashes)
            await Self.startBluetoothdAgain()
        }
        let logStart = Self.logSize()
        Self.previousTest.withLock { $0 = (test.name, logStart, knownCrashes) }
        if let commandLine = Bluetoothd.commandLine() {
            Self.bluetoothdCommandLine.withLock { if $0 == nil { $0 = commandLine } }
        }
        Self.failed.store(false, ordering: .sequentiallyConsistent)
        // What the test records once bluetoothd died of a known bug of its own (the test's, or
        // one any test can meet) follows from that crash: a known issue. Anything recorded
        // while bluetoothd runs, or after any other crash, stays a failure.
        let diedOfAKnownBug = { @Sendable () -> Bool in
            guard Bluetoothd.commandLine() == nil else { return false }
            let log = Self.log(since: logStart)
            return knownCrashes.contains { log.contains($0.signature) }
        }
        var thrown: (any Error)?
        do {
            try await withKnownIssue("bluetoothd crashed of a known bug of its own first", isIntermittent: true) {
                try await function()
            } matching: { _ in
                diedOfAKnownBug()
            }
        } catch {
            thrown = error
        }
        // In a task of its own: after a test that ran out of time the scope's task is cancelled,
        // and every wait below would end at once (CI 2026-12-06: "bluetoothd could not be started
        // again" after a time limit, and the next tests met no bluetoothd).
        let failed = thrown != nil
        await Task {
            await Self.cleanUp(
                after: test, serial: serial, logStart: logStart, knownCrashes: knownCrashes, threw: failed)
        }.value
        if let thrown { throw thrown }
    }

    /// What follows every test: stops what it started, checks that the system bus and
    /// bluetoothd outlived it (starting them again if not), prints the report of a failed test
    /// and checks the default agent.
    static func cleanUp(
        after test: Test, serial: Int, logStart: UInt64, knownCrashes: [KnownBluetoothdCrash], threw: Bool
    ) async {
        let started = RunningPrograms.remove(after: serial)
        // The system bus too (a test that restarts it leaves a new one).
        if SystemBus.daemonPID() == nil {
            Issue.record("the system dbus-daemon is not running after \(test.name)")
            do { try await SystemBus.ensureRunning() } catch {
                Issue.record("the system dbus-daemon could not be started again: \(error)")
            }
        }
        // bluetoothd must outlive every test (a test that restarts it leaves a new one): one that
        // died is a failure of this test, and is started again so that the next test is not its
        // victim too.
        let bluetoothdGone = Bluetoothd.commandLine() == nil
        if bluetoothdGone {
            Self.recordBluetoothdGone(
                "bluetoothd is not running after \(test.name): it exited or crashed during the test",
                log: Self.log(since: logStart), knownCrashes: knownCrashes)
        }
        if threw || bluetoothdGone || Self.failed.load(ordering: .sequentiallyConsistent) {
            print(Self.report(test.name, started, logStart: logStart))
        }
        for program in started { program.stop() }
        // After the programs, whose agents leave with them.
        await DefaultAgentCheck.check(
            test.name, logStart: logStart, asked: test.traits.contains { $0 is AsksForDefaultAgent },
            bluetoothdRunning: !bluetoothdGone)
        if bluetoothdGone { await Self.startBluetoothdAgain() }
    }

    /// The test that ran last: its name, where bluetoothd's log stood when it started, and the
    /// crashes known to it.
    static let previousTest = Mutex<(name: String, logStart: UInt64, knownCrashes: [KnownBluetoothdCrash])?>(nil)

    /// Records that bluetoothd is gone: a known issue when `log` (bluetoothd's, over the test
    /// that made it crash) has the signature of one of `knownCrashes`, a failure otherwise.
    static func recordBluetoothdGone(_ gone: String, log: String, knownCrashes: [KnownBluetoothdCrash]) {
        if let known = knownCrashes.first(where: { log.contains($0.signature) }) {
            withKnownIssue(Comment(rawValue: known.explanation)) { Issue.record(Comment(rawValue: gone)) }
        } else {
            Issue.record(Comment(rawValue: gone))
        }
    }

    /// Starts bluetoothd with its first command line, so that the next test is not the victim
    /// of a crash too.
    static func startBluetoothdAgain() async {
        guard let commandLine = bluetoothdCommandLine.withLock({ $0 }) else { return }
        do {
            try Bluetoothd.start(commandLine)
            try await Bluetoothd.waitUntilAdaptersPowered()
        } catch {
            Issue.record("bluetoothd could not be started again: \(error)")
        }
    }

    /// bluetoothd's command line as first seen, to start it again if a test leaves none.
    static let bluetoothdCommandLine = Mutex<[String]?>(nil)

    static func logSize() -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: bluetoothdLog))?[.size] as? NSNumber)?.uint64Value ?? 0
    }

    /// Swift's crash report in a program's output, cut to what tells where: the "Program crashed"
    /// line and the crashed thread's frames (the last lines alone showed only other threads and
    /// the registers, CI 2026-12-02); nil if the program did not crash.
    static func crashSummary(_ lines: [Substring]) -> String? {
        guard let header = lines.firstIndex(where: { $0.contains("*** Program crashed:") }) else { return nil }
        var summary = [lines[header]]
        if let thread = lines[header...].firstIndex(where: { $0.hasPrefix("Thread ") && $0.hasSuffix(" crashed:") }) {
            summary.append(lines[thread])
            // Its frames, up to the next thread or the registers.
            summary += lines[(thread + 1)...].prefix(40).prefix(while: {
                !$0.hasPrefix("Thread ") && $0 != "Registers:"
            })
        }
        return summary.joined(separator: "\n")
    }

    /// What bluetoothd logged from `logStart` on.
    static func log(since logStart: UInt64) -> String {
        guard let handle = FileHandle(forReadingAtPath: bluetoothdLog) else { return "" }
        defer { try? handle.close() }
        try? handle.seek(toOffset: logStart)
        return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    }

    /// The failure report: each program's last lines, then bluetoothd's log since `logStart`.
    static func report(_ test: String, _ programs: [RunningPrograms.Entry], logStart: UInt64) -> String {
        var text = "=== \(test) failed: what it started, and bluetoothd's log during it\n"
        for program in programs {
            let lines = program.output().split(separator: "\n", omittingEmptySubsequences: false)
            if let crash = crashSummary(lines) {
                text += "--- \(program.name) crashed (the backtrace's header and crashed thread)\n" + crash + "\n"
            }
            // The bus tools' listings (object trees) crowded bluetoothd's log out of what CI keeps.
            let kept = Self.briefTools.contains(program.name) ? briefLines : reportLines
            text += "--- \(program.name) (last \(min(lines.count, kept)) lines)\n"
            text += lines.suffix(kept).joined(separator: "\n") + "\n"
        }
        let lines = log(since: logStart).split(separator: "\n")
        text += "--- bluetoothd.log during the test (last \(min(lines.count, logLines)) of \(lines.count) lines)\n"
        text += lines.suffix(logLines).joined(separator: "\n") + "\n=== end of \(test)"
        return text
    }
}

extension Trait where Self == EndToEndScope {
    /// Stops what each test started and reports its programs and bluetoothd's log on failure.
    static var endToEndScope: Self { EndToEndScope() }
}

extension Trait where Self == IssueHandlingTrait {
    /// Marks the running end-to-end test failed when it records a failing issue (kept as is).
    static var endToEndFailures: Self {
        .compactMapIssues { issue in
            if issue.isFailure { EndToEndScope.failed.store(true, ordering: .sequentiallyConsistent) }
            return issue
        }
    }
}
