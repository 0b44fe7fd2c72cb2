import Foundation
import TestSupport
import Testing

/// The harness's rule for bluetoothd's own crashes (``EndToEndScope``, ``KnownBluetoothdCrash``),
/// checked against the guest's real bluetoothd. In the serialized end-to-end suite.
extension EndToEndTests {
    /// What a test records after bluetoothd died of a known bug of its own is a known issue:
    /// this test writes the line a known crash leaves in bluetoothd's log, kills bluetoothd, and
    /// then records an issue. It passes with known issues only if the harness tells the crash
    /// and what followed from it apart; the scope starts bluetoothd again for the next test.
    @Test(.loadScaledTimeLimit(minutes: 2), .killedOnPurposeByTheHarnessCheck)
    func whatATestRecordsAfterAKnownBluetoothdCrashIsAKnownIssue() async throws {
        let (pid, _) = try #require(Bluetoothd.running())
        let log = try #require(FileHandle(forWritingAtPath: EndToEndScope.bluetoothdLog))
        _ = try log.seekToEnd()
        try log.write(contentsOf: Data((KnownBluetoothdCrash.killedOnPurposeByTheHarnessCheck.signature + "\n").utf8))
        try log.close()
        kill(pid, SIGKILL)
        try await pollUntil("bluetoothd \(pid) is gone", timeout: .seconds(10)) { Bluetoothd.running() == nil }
        Issue.record("recorded after bluetoothd died of a known bug: a known issue, not a failure")
    }
}

extension Trait where Self == KnownBluetoothdCrash {
    /// The crash ``EndToEndTests/whatATestRecordsAfterAKnownBluetoothdCrashIsAKnownIssue()``
    /// makes on purpose, and the line it writes into bluetoothd's log first.
    static var killedOnPurposeByTheHarnessCheck: Self {
        KnownBluetoothdCrash(
            signature: "bluezkit e2e harness: bluetoothd killed on purpose to check the known-crash rule",
            explanation: "bluetoothd killed on purpose by the harness check")
    }
}
