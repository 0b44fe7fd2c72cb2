// libFuzzer target for the restoration files: what RestorationStore and the managers make
// of a saved state file that may be corrupt, truncated, hand-edited or hostile.
//
// Built outside SwiftPM by `Scripts/fuzz --target restoration`: Sources/DBus and
// Sources/BlueZ are compiled as modules DBus and BlueZ first, then Sources/BlueZKit/*.swift
// with Fuzz/Restoration/*.swift and Fuzz/Shared/*.swift as module BlueZKit, so the target
// sees BlueZKit's internal API (the records, the store's package API).
//
// The first input byte chooses a mode (byte % 4):
//
//   0 central file     the rest is the file of identifier "fuzz", loaded as a central's
//                      state (CentralRestorationRecord)
//   1 peripheral file  the same, loaded as a peripheral's state (PeripheralRestorationRecord)
//   2 central record   the rest drives a generator of central records (and identifiers),
//                      which are saved and loaded again
//   3 peripheral record  the same for peripheral records (included services, subscribed
//                      centrals, advertisement data)
//
// Oracles (FuzzRestorationChecks.swift): nothing traps (AddressSanitizer and LeakSanitizer
// watch too); loading a file gives a record or a RestorationError of a content code
// (unreadable, unsupportedVersion, wrongRole, wrongIdentifier), and then the file was moved
// aside to `.unreadable` and is no longer listed; a record that loads is usable as the
// managers use it (services rebuilt with their includes, advertisement, tokens, UUIDs) and
// round-trips: load(save(record)) == record; a generated record round-trips unless its
// include chains are longer than the documented limit, which is `unreadable`.
//
// The store lives in a fresh 0700 directory under /dev/shm (or $TMPDIR), removed at exit.
// `--make-corpus=DIR` writes the seed corpus (saved files of generated records, and fixed
// pseudo-random streams for the generator modes) and exits.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func restorationFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    var input = FuzzInput(UnsafeBufferPointer(start: data, count: size))
    switch input.byte() % 4 {
    case 0: fuzzLoadFile(Array(input.rest()), as: CentralRestorationRecord.self, role: .central)
    case 1: fuzzLoadFile(Array(input.rest()), as: PeripheralRestorationRecord.self, role: .peripheral)
    case 2:
        var maker = FuzzRecordMaker()
        fuzzRoundTrip(maker.central(&input), role: .central, identifier: maker.identifier(&input))
    default:
        var maker = FuzzRecordMaker()
        fuzzRoundTrip(maker.peripheral(&input), role: .peripheral, identifier: maker.identifier(&input))
    }
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func restorationFuzzerInitialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    if let directory = fuzzMakeCorpusArgument(argc, argv) {
        exit(fuzzWriteSeeds(fuzzRestorationSeeds(), to: directory) ? 0 : 1)
    }
    return 0
}

// MARK: - The store

/// The store every input uses: a private directory, emptied after each input.
let fuzzStore: RestorationStore = {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp")
    var template = Array((base + "/bluezkit-restoration-fuzz.XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { fuzzFail("cannot make a store directory under \(base)") }
    let path = String(cString: made)
    atexit { fuzzEmptyStore(removingDirectory: true) }
    return RestorationStore(directory: URL(fileURLWithPath: path, isDirectory: true))
}()

/// Removes every file of the store (and the directory itself at exit).
func fuzzEmptyStore(removingDirectory: Bool = false) {
    let path = fuzzStore.directory.path
    for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
        unlink(path + "/" + name)
    }
    if removingDirectory { rmdir(path) }
}

/// The identifier of the files fed in modes 0 and 1 (the seeds' envelopes name it).
let fuzzFileIdentifier = "fuzz"

/// Writes `bytes` as the state file of `identifier`, as a crash or another program might have left it.
func fuzzWriteStateFile(_ bytes: [UInt8], for identifier: String) {
    let path = fuzzStore.directory.path + "/" + RestorationStore.fileName(for: identifier)
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { fuzzFail("cannot write \(path): errno \(errno)") }
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written > 0 else { fuzzFail("cannot write \(path): errno \(errno)") }
        offset += written
    }
    close(descriptor)
}

/// The bytes of the state file of `identifier`, or nil when there is none.
func fuzzReadStateFile(for identifier: String, suffix: String = "") -> [UInt8]? {
    let path = fuzzStore.directory.path + "/" + RestorationStore.fileName(for: identifier) + suffix
    return FileManager.default.contents(atPath: path).map { Array($0) }
}
