// Seed corpora: the `--make-corpus=DIR` argument, and writing seeds (shared by the targets
// in Fuzz/ but the D-Bus one, which has its own FuzzCorpus).

#if canImport(Glibc)
    import Glibc
#endif

/// The directory of a `--make-corpus=DIR` argument (libFuzzer ignores arguments that start
/// with a double dash), or nil.
func fuzzMakeCorpusArgument(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> String? {
    guard let arguments = argv.pointee else { return nil }
    for index in 0..<Int(argc.pointee) {
        guard let raw = arguments[index] else { continue }
        let argument = String(cString: raw)
        if argument.hasPrefix("--make-corpus=") { return String(argument.dropFirst("--make-corpus=".count)) }
    }
    return nil
}

/// For every mode, three fixed pseudo-random streams (our own LCG) after the mode byte.
func fuzzGeneratorSeeds(modes: Range<Int>) -> [(String, [UInt8])] {
    var seeds: [(String, [UInt8])] = []
    var state: UInt32 = 0x2545_F491
    for mode in modes {
        for variant in 0..<3 {
            var bytes: [UInt8] = [UInt8(mode)]
            for _ in 0..<(48 + 96 * variant) {
                state = state &* 1_664_525 &+ 1_013_904_223
                bytes.append(UInt8(truncatingIfNeeded: state >> 24))
            }
            seeds.append(("mode\(mode)-\(variant)", bytes))
        }
    }
    return seeds
}

/// Writes each seed to `directory/name`; false (with a message) on failure.
func fuzzWriteSeeds(_ seeds: [(String, [UInt8])], to directory: String) -> Bool {
    mkdir(directory, 0o755)
    for (name, bytes) in seeds {
        let path = directory + "/" + name
        guard let file = fopen(path, "wb") else {
            fuzzPrintError("cannot write \(path)")
            return false
        }
        _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    print("wrote \(seeds.count) seeds to \(directory)")
    return true
}
