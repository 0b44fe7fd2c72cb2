// The restoration target's seed corpus (`--make-corpus=DIR`): files the store itself
// saved for generated records (modes 0 and 1), a few envelopes that are wrong in one way,
// and fixed pseudo-random streams for the generator modes (2 and 3).

import Foundation

func fuzzRestorationSeeds() -> [(String, [UInt8])] {
    var seeds: [(String, [UInt8])] = []
    // Saved files: the generator driven by the generator seeds' streams.
    let streams = fuzzGeneratorSeeds(modes: 0..<2)
    for (index, (name, stream)) in streams.enumerated() {
        let bytes = stream.dropFirst().withUnsafeBufferPointer { buffer -> [UInt8]? in
            var input = FuzzInput(buffer)
            var maker = FuzzRecordMaker()
            defer { fuzzEmptyStore() }
            do throws(RestorationError) {
                if index < 3 {
                    try fuzzStore.save(maker.central(&input), role: .central, for: fuzzFileIdentifier)
                } else {
                    try fuzzStore.save(maker.peripheral(&input), role: .peripheral, for: fuzzFileIdentifier)
                }
            } catch {
                fuzzPrintError("cannot save seed \(name): \(error)")
                return nil
            }
            return fuzzReadStateFile(for: fuzzFileIdentifier)
        }
        guard let bytes else { continue }
        seeds.append(("file-" + name, [index < 3 ? 0 : 1] + bytes))
    }
    // Envelopes wrong in one way each.
    let envelope = { (format: String, version: String, role: String, identifier: String, payload: String) in
        Array(
            """
            {"format":"\(format)","version":\(version),"role":"\(role)","identifier":"\(identifier)",\
            "payload":\(payload)}
            """.utf8)
    }
    let marker = RestorationStore.formatMarker
    let peripheral = #"{"services":[{"uuid":"180D","isPrimary":true,"characteristics":[],"includes":[0]}]}"#
    seeds += [
        ("envelope-version-2", [0] + envelope(marker, "2", "central", "fuzz", "{}")),
        ("envelope-wrong-role", [0] + envelope(marker, "1", "peripheral", "fuzz", "{}")),
        ("envelope-wrong-identifier", [1] + envelope(marker, "1", "peripheral", "other", peripheral)),
        ("envelope-other-format", [1] + envelope("other", "1", "peripheral", "fuzz", peripheral)),
        ("envelope-include-cycle", [1] + envelope(marker, "1", "peripheral", "fuzz", peripheral)),
        ("envelope-empty-central", [0] + envelope(marker, "1", "central", "fuzz", #"{"peripherals":[]}"#)),
    ]
    return seeds + fuzzGeneratorSeeds(modes: 2..<4)
}
