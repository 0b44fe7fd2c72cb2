// Failing a fuzz target: a broken invariant prints "fuzz failure: …" and aborts, which
// libFuzzer records as a crash (shared by every target in Fuzz/).

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Failing

/// Reports a broken invariant and aborts, so that libFuzzer saves the input.
func fuzzFail(_ what: @autoclosure () -> String) -> Never {
    fuzzPrintError("fuzz failure: " + what())
    abort()
}

/// A line on standard error, unbuffered.
func fuzzPrintError(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

func fuzzCheck(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { fuzzFail(what()) }
}
