import Testing

/// The failure report's crash summary (``EndToEndScope/crashSummary(_:)``), on the shape of a
/// Swift crash report: it must name the crash and show the crashed thread's frames, which the
/// report's last lines (other threads, registers, images) leave out. Runs with the guest tier.
@Suite(.loadScaledTimeLimit(minutes: 1)) struct CrashSummaryEndToEndTests {
    static let report = """
        some output
        *** Signal 11: Backtracing from 0x7f004bf7925e... done ***

        *** Program crashed: Bad pointer dereference at 0x00007f07c0031ce8 ***

        Thread 0 "main":

          0  0x00007f004a4caf16 __futex_abstimed_wait_common + 198 in libc.so.6
        ...

        Thread 13 "-qos.overcommit" crashed:

          0      0x00007f004bf7925e _dispatch_unote_unregister_muxed + 238 in libdispatch.so
          1 [ra] 0x00007f004bf74103 _dispatch_source_invoke + 834 in libdispatch.so
        ...

        Thread 14 "-qos.overcommit":

          0  0x00007f004a4caf16 __futex_abstimed_wait_common + 198 in libc.so.6

        Registers:

        rax 0x00007f07c0031ce0  139671262928096
        """

    @Test func aCrashIsSummarisedByItsCrashedThread() throws {
        let lines = Self.report.split(separator: "\n", omittingEmptySubsequences: false)
        let summary = try #require(EndToEndScope.crashSummary(lines))
        #expect(summary.contains("*** Program crashed: Bad pointer dereference"))
        #expect(summary.contains("Thread 13 \"-qos.overcommit\" crashed:"))
        #expect(summary.contains("_dispatch_unote_unregister_muxed"))
        #expect(summary.contains("_dispatch_source_invoke"))
        #expect(!summary.contains("Thread 14"))
        #expect(!summary.contains("__futex_abstimed_wait_common"))
        #expect(!summary.contains("rax"))
    }

    @Test func outputWithoutACrashHasNoSummary() {
        let lines = "started\nheartRate 72\nstopped".split(separator: "\n", omittingEmptySubsequences: false)
        #expect(EndToEndScope.crashSummary(lines) == nil)
    }
}
