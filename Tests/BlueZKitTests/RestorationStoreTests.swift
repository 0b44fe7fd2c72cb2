import BlueZKit
import Dispatch
import Foundation
import Glibc
import Testing

/// A state as a manager would save it.
private struct SampleState: Codable, Equatable, Sendable {
    var peripherals: [String]
    var isScanning: Bool
}

/// A fresh directory for one test, removed when the test ends; the store
/// lives in its `store` subdirectory, so anything written beside it shows.
private func withTemporaryRoot(_ body: (_ root: URL, _ store: RestorationStore) throws -> Void) throws {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("RestorationStoreTests-\(UUID().uuidString)", isDirectory: true)
    // Mode 0700 explicitly: `modesAreUserOnlyEvenWithUmaskZero` sets the process's umask to 0
    // for a moment while other tests run, and the store refuses a directory others may write to.
    try FileManager.default.createDirectory(
        at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: root) }
    try body(root, RestorationStore(directory: root.appendingPathComponent("store", isDirectory: true)))
}

private func filePath(_ store: RestorationStore, _ identifier: String) -> String {
    store.directory.path + "/" + RestorationStore.fileName(for: identifier)
}

private func contents(_ store: RestorationStore) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: store.directory.path)) ?? []).sorted()
}

/// Writes raw bytes where the store keeps `identifier`'s state.
private func plant(_ bytes: Data, in store: RestorationStore, for identifier: String) throws {
    try FileManager.default.createDirectory(
        at: store.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try bytes.write(to: URL(fileURLWithPath: filePath(store, identifier)))
}

private func envelope(
    format: String = RestorationStore.formatMarker, version: Int = 1, role: String = "central",
    identifier: String, payload: String = #"{"isScanning":true,"peripherals":["A"]}"#
) -> Data {
    let identifierJSON = String(decoding: try! JSONEncoder().encode(identifier), as: UTF8.self)
    let fields = #""format":"\#(format)","version":\#(version),"role":"\#(role)","identifier":\#(identifierJSON)"#
    return Data("{\(fields),\"payload\":\(payload)}".utf8)
}

private func mode(_ path: String) -> mode_t {
    var info = stat()
    #expect(stat(path, &info) == 0, "stat \(path)")
    return info.st_mode & 0o7777
}

@Suite("RestorationStore", .timeLimit(.minutes(5)))
struct RestorationStoreTests {
    private let state = SampleState(peripherals: ["5C:F3:70:00:00:01", "5C:F3:70:00:00:02"], isScanning: true)

    @Test func roundTripWritesAnEnvelope() throws {
        try withTemporaryRoot { _, store in
            #expect(try store.load(SampleState.self, role: .central, for: "heart-rate") == nil)
            try store.save(state, role: .central, for: "heart-rate")
            #expect(try store.load(SampleState.self, role: .central, for: "heart-rate") == state)
            #expect(contents(store) == [RestorationStore.fileName(for: "heart-rate")])
            let data = try Data(contentsOf: URL(fileURLWithPath: filePath(store, "heart-rate")))
            let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(json["format"] as? String == RestorationStore.formatMarker)
            #expect(json["version"] as? Int == 1)
            #expect(json["role"] as? String == "central")
            #expect(json["identifier"] as? String == "heart-rate")
            #expect((json["payload"] as? [String: Any])?["isScanning"] as? Bool == true)
            #expect(try store.load(SampleState.self, role: .central, for: "other") == nil)
        }
    }

    @Test func loadOfAMissingDirectoryCreatesNothing() throws {
        try withTemporaryRoot { root, store in
            #expect(try store.load(SampleState.self, role: .peripheral, for: "x") == nil)
            #expect(store.savedIdentifiers().isEmpty)
            try store.removeState(for: "x")
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
        }
    }

    @Test func saveOverwritesAndLeavesNoTemporaryFile() throws {
        try withTemporaryRoot { _, store in
            try store.save(state, role: .peripheral, for: "id")
            let newer = SampleState(peripherals: [], isScanning: false)
            try store.save(newer, role: .peripheral, for: "id")
            #expect(try store.load(SampleState.self, role: .peripheral, for: "id") == newer)
            #expect(contents(store) == [RestorationStore.fileName(for: "id")])
        }
    }

    @Test func concurrentSavesLeaveOneCompleteState() throws {
        try withTemporaryRoot { _, store in
            DispatchQueue.concurrentPerform(iterations: 32) { index in
                let state = SampleState(peripherals: Array(repeating: "\(index)", count: 500), isScanning: true)
                try? store.save(state, role: .central, for: "busy")
            }
            let loaded = try #require(try store.load(SampleState.self, role: .central, for: "busy"))
            #expect(loaded.peripherals.count == 500 && Set(loaded.peripherals).count == 1)
            #expect(contents(store) == [RestorationStore.fileName(for: "busy")])
        }
    }

    static let hostileIdentifiers: [String] = [
        "", "../../etc/passwd", "a/b", ".", "..", "/", "/etc/passwd", "~", " ", "nul\u{0}inside", "\u{0}",
        "line\nbreak\r\n", "tab\there", "emoji 🛰️👩‍👩‍👧", "back\\slash", ".tmp-XXXXXX", "id-61.json", "x.unreadable",
        String(repeating: "x", count: 10_000), String(repeating: "../", count: 40), String(repeating: "é", count: 60),
    ]

    @Test func hostileIdentifiersStayInsideTheDirectory() throws {
        try withTemporaryRoot { root, store in
            for (index, identifier) in Self.hostileIdentifiers.enumerated() {
                try store.save(
                    SampleState(peripherals: [identifier], isScanning: index.isMultiple(of: 2)), role: .central,
                    for: identifier)
            }
            for (index, identifier) in Self.hostileIdentifiers.enumerated() {
                let loaded = try store.load(SampleState.self, role: .central, for: identifier)
                let expected = SampleState(peripherals: [identifier], isScanning: index.isMultiple(of: 2))
                #expect(loaded == expected, "\(identifier.debugDescription)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["store"])
            let files = contents(store)
            #expect(files.count == Self.hostileIdentifiers.count)
            for file in files {
                #expect(RestorationStore.isStateFileName(file), "\(file)")
                #expect(file.utf8.count <= 255)
                var isDirectory: ObjCBool = true
                let exists = FileManager.default.fileExists(
                    atPath: store.directory.path + "/" + file, isDirectory: &isDirectory)
                #expect(exists && !isDirectory.boolValue)
            }
            #expect(
                store.savedIdentifiers().map { Array($0.utf8) }
                    == Self.hostileIdentifiers.sorted().map { Array($0.utf8) })
        }
    }

    @Test func canonicallyEquivalentIdentifiersAreDistinct() throws {
        try withTemporaryRoot { _, store in
            let composed = "caf\u{E9}"
            let decomposed = "cafe\u{301}"
            try store.save(SampleState(peripherals: ["composed"], isScanning: true), role: .central, for: composed)
            try store.save(SampleState(peripherals: ["decomposed"], isScanning: true), role: .central, for: decomposed)
            #expect(try store.load(SampleState.self, role: .central, for: composed)?.peripherals == ["composed"])
            #expect(try store.load(SampleState.self, role: .central, for: decomposed)?.peripherals == ["decomposed"])
            #expect(contents(store).count == 2)
        }
    }

    @Test func longIdentifiersGetDistinctFixedLengthNames() throws {
        let long = String(repeating: "x", count: 10_000)
        let pairs = [
            (long, String(repeating: "x", count: 9_999) + "y"), (long, String(repeating: "x", count: 9_999)),
            ("a" + String(repeating: "z", count: 100), "b" + String(repeating: "z", count: 100)),
        ]
        try withTemporaryRoot { _, store in
            for (first, second) in pairs {
                let names = [RestorationStore.fileName(for: first), RestorationStore.fileName(for: second)]
                #expect(names[0] != names[1])
                #expect(names.allSatisfy { $0.hasPrefix("hash-") && $0.utf8.count == 5 + 32 + 5 })
                try store.save(SampleState(peripherals: ["first"], isScanning: true), role: .central, for: first)
                try store.save(SampleState(peripherals: ["second"], isScanning: true), role: .central, for: second)
                #expect(try store.load(SampleState.self, role: .central, for: first)?.peripherals == ["first"])
                #expect(try store.load(SampleState.self, role: .central, for: second)?.peripherals == ["second"])
            }
        }
        let hundred = String(repeating: "q", count: 100)
        #expect(RestorationStore.fileName(for: hundred) == "id-" + String(repeating: "71", count: 100) + ".json")
        #expect(RestorationStore.fileName(for: "") == "id-.json")
        #expect(RestorationStore.fileName(for: "a/") == "id-612f.json")
    }

    @Test func fnv1a128MatchesReferenceValues() {
        #expect(FNV1a128.hexDigest(of: []) == "6c62272e07bb014262b821756295c58d")
        #expect(FNV1a128.hexDigest(of: Array("a".utf8)) == "d228cb696f1a8caf78912b704e4a8964")
        #expect(FNV1a128.hexDigest(of: Array("foobar".utf8)) == "343e1662793c64bf6f0d3597ba446f18")
        #expect(
            FNV1a128.hexDigest(of: Array(String(repeating: "x", count: 1000).utf8))
                == "00e2531c2570995111249bb059f17d2d")
    }

    @Test func modesAreUserOnlyEvenWithUmaskZero() throws {
        try withTemporaryRoot { root, _ in
            let store = RestorationStore(directory: root.appendingPathComponent("a/b/store", isDirectory: true))
            let previous = umask(0)
            defer { umask(previous) }
            try store.save(state, role: .central, for: "mode")
            #expect(mode(filePath(store, "mode")) == 0o600)
            #expect(mode(store.directory.path) == 0o700)
            #expect(mode(root.path + "/a") == 0o700)
            #expect(mode(root.path + "/a/b") == 0o700)
            // A world-readable file left by someone else is replaced, not rewritten in place.
            #expect(chmod(filePath(store, "mode"), 0o644) == 0)
            try store.save(state, role: .central, for: "mode")
            #expect(mode(filePath(store, "mode")) == 0o600)
        }
    }

    enum Damage: String, CaseIterable, Sendable {
        case empty, notJSON, truncated, binary, jsonArray, foreignFormat, missingVersion
        case newerVersion, wrongRole, wrongIdentifier, payloadOfAnotherType

        var expectedCode: RestorationError.Code {
            switch self {
            case .newerVersion: .unsupportedVersion
            case .wrongRole: .wrongRole
            case .wrongIdentifier: .wrongIdentifier
            default: .unreadable
            }
        }

        func bytes(for identifier: String) -> Data {
            switch self {
            case .empty: Data()
            case .notJSON: Data("restore me".utf8)
            case .truncated: envelope(identifier: identifier).prefix(40)
            case .binary: Data([0x00, 0xFF, 0x7B, 0x00, 0x22, 0xC3])
            case .jsonArray: Data("[1, 2, 3]".utf8)
            case .foreignFormat: envelope(format: "someone-else", identifier: identifier)
            case .missingVersion: Data(#"{"format":"\#(RestorationStore.formatMarker)","role":"central"}"#.utf8)
            case .newerVersion: envelope(version: 2, identifier: identifier)
            case .wrongRole: envelope(role: "peripheral", identifier: identifier)
            case .wrongIdentifier: envelope(identifier: identifier + "-other")
            case .payloadOfAnotherType: envelope(identifier: identifier, payload: #"{"isScanning":"yes"}"#)
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedFileIsReportedMovedAsideAndNotOverwritten(_ damage: Damage) throws {
        try withTemporaryRoot { _, store in
            let original = damage.bytes(for: "damaged")
            try plant(original, in: store, for: "damaged")
            let error = try #require(throws: RestorationError.self) {
                try store.load(SampleState.self, role: .central, for: "damaged")
            }
            #expect(error.code == damage.expectedCode)
            #expect(error.message.contains("damaged") && error.message.contains(RestorationStore.unreadableSuffix))
            let asidePath = filePath(store, "damaged") + RestorationStore.unreadableSuffix
            #expect(!FileManager.default.fileExists(atPath: filePath(store, "damaged")))
            #expect(try store.load(SampleState.self, role: .central, for: "damaged") == nil)
            try store.save(state, role: .central, for: "damaged")
            #expect(try store.load(SampleState.self, role: .central, for: "damaged") == state)
            #expect(try Data(contentsOf: URL(fileURLWithPath: asidePath)) == original)
            #expect(store.savedIdentifiers() == ["damaged"])
        }
    }

    @Test func aLaterDamagedFileReplacesTheEarlierCopy() throws {
        try withTemporaryRoot { _, store in
            try plant(Data("first".utf8), in: store, for: "id")
            #expect(throws: RestorationError.self) { try store.load(SampleState.self, role: .central, for: "id") }
            try plant(Data("second".utf8), in: store, for: "id")
            #expect(throws: RestorationError.self) { try store.load(SampleState.self, role: .central, for: "id") }
            let aside = URL(fileURLWithPath: filePath(store, "id") + RestorationStore.unreadableSuffix)
            #expect(try Data(contentsOf: aside) == Data("second".utf8))
            #expect(contents(store) == [RestorationStore.fileName(for: "id") + RestorationStore.unreadableSuffix])
        }
    }

    @Test func wrongRoleIsReportedForTheOtherRole() throws {
        try withTemporaryRoot { _, store in
            try store.save(state, role: .peripheral, for: "shared")
            let error = try #require(throws: RestorationError.self) {
                try store.load(SampleState.self, role: .central, for: "shared")
            }
            #expect(error.code == .wrongRole)
            #expect(error.description.hasPrefix("RestorationError.wrongRole: "))
        }
    }

    @Test func savedIdentifiersSkipJunkAndTemporaryFiles() throws {
        try withTemporaryRoot { _, store in
            try store.save(state, role: .central, for: "beta")
            try store.save(state, role: .peripheral, for: "alpha")
            let alphaFile = try Data(contentsOf: URL(fileURLWithPath: filePath(store, "alpha")))
            let directory = store.directory.path + "/"
            try alphaFile.write(to: URL(fileURLWithPath: directory + RestorationStore.temporaryFilePrefix + "a1B2c3"))
            try alphaFile.write(to: URL(fileURLWithPath: filePath(store, "alpha") + RestorationStore.unreadableSuffix))
            try alphaFile.write(to: URL(fileURLWithPath: filePath(store, "delta")))  // misnamed copy
            try alphaFile.write(to: URL(fileURLWithPath: directory + "notes.txt"))
            try alphaFile.write(to: URL(fileURLWithPath: directory + "id-zz.json"))
            try plant(Data("{".utf8), in: store, for: "gamma")
            try plant(envelope(version: 2, identifier: "epsilon"), in: store, for: "epsilon")
            try FileManager.default.createDirectory(atPath: filePath(store, "zeta"), withIntermediateDirectories: false)
            #expect(store.savedIdentifiers() == ["alpha", "beta"])
            #expect(store.savedIdentifiers(for: .central) == ["beta"])
            #expect(store.savedIdentifiers(for: .peripheral) == ["alpha"])
            #expect(FileManager.default.fileExists(atPath: filePath(store, "gamma")))  // listing moves nothing
            #expect(!RestorationStore.isStateFileName(RestorationStore.temporaryFilePrefix + "a1B2c3"))
        }
    }

    @Test func removeStateDeletesOnlyTheSavedState() throws {
        try withTemporaryRoot { _, store in
            try store.save(state, role: .central, for: "gone")
            try store.save(state, role: .central, for: "kept")
            try plant(Data("x".utf8), in: store, for: "evidence")
            _ = try? store.load(SampleState.self, role: .central, for: "evidence")
            try store.removeState(for: "gone")
            try store.removeState(for: "gone")
            try store.removeState(for: "evidence")
            #expect(try store.load(SampleState.self, role: .central, for: "gone") == nil)
            #expect(store.savedIdentifiers() == ["kept"])
            #expect(
                contents(store).contains(RestorationStore.fileName(for: "evidence") + RestorationStore.unreadableSuffix)
            )
        }
    }

    @Test func saveIntoAFileReportsWriteFailed() throws {
        try withTemporaryRoot { root, _ in
            try Data("plain file".utf8).write(to: root.appendingPathComponent("file"))
            let store = RestorationStore(directory: root.appendingPathComponent("file/store"))
            let error = try #require(throws: RestorationError.self) { try store.save(state, role: .central, for: "x") }
            #expect(error.code == .writeFailed)
            #expect(error.underlying is POSIXError)
            #expect(try Data(contentsOf: root.appendingPathComponent("file")) == Data("plain file".utf8))
        }
    }

    static let xdgCases: [([String: String], String)] = [
        (["XDG_STATE_HOME": "/srv/state"], "/srv/state/bluezkit/restoration"),
        (["XDG_STATE_HOME": "/srv/state/"], "/srv/state/bluezkit/restoration"),
        ([:], "/home/ada/.local/state/bluezkit/restoration"),
        (["XDG_STATE_HOME": ""], "/home/ada/.local/state/bluezkit/restoration"),
        (["XDG_STATE_HOME": "relative/state"], "/home/ada/.local/state/bluezkit/restoration"),
        (["XDG_STATE_HOME": "~/state"], "/home/ada/.local/state/bluezkit/restoration"),
        (["HOME": "/elsewhere", "XDG_CONFIG_HOME": "/cfg"], "/home/ada/.local/state/bluezkit/restoration"),
    ]

    @Test(arguments: xdgCases)
    func standardDirectoryFollowsXDG(_ environment: [String: String], _ expected: String) {
        let home = URL(fileURLWithPath: "/home/ada", isDirectory: true)
        #expect(RestorationStore.standardDirectory(environment: environment, homeDirectory: home).path == expected)
    }

    @Test func standardStoreIsInTheStateDirectory() {
        let expected = RestorationStore.standardDirectory(
            environment: ProcessInfo.processInfo.environment,
            homeDirectory: FileManager.default.homeDirectoryForCurrentUser)
        #expect(RestorationStore.standard.directory == expected)
        #expect(RestorationStore.standard == RestorationStore(directory: expected))
    }

    @Test func secondClaimFailsUntilTheFirstIsReleased() throws {
        try withTemporaryRoot { root, store in
            var first: RestorationClaim? = try store.claim("manager")
            let error = try #require(throws: RestorationError.self) { try store.claim("manager") }
            #expect(error.code == .identifierInUse)
            #expect(error.message.contains("manager"))
            let sameDirectoryOtherSpelling = RestorationStore(directory: URL(fileURLWithPath: root.path + "/./store/"))
            #expect(throws: RestorationError.self) { try sameDirectoryOtherSpelling.claim("manager") }
            #expect(first?.isActive == true)
            first = nil  // deinit releases
            let second = try store.claim("manager")
            #expect(second.isActive)
            second.release()
            second.release()
            #expect(!second.isActive)
            let third = try store.claim("manager")
            withExtendedLifetime(third) { () -> Void in
                #expect(throws: RestorationError.self) { try store.claim("manager") }
            }
        }
    }

    @Test func claimsOfOtherDirectoriesOrIdentifiersDoNotConflict() throws {
        try withTemporaryRoot { root, store in
            let other = RestorationStore(directory: root.appendingPathComponent("other"))
            let claims = [
                try store.claim("manager"), try other.claim("manager"), try store.claim("manager2"),
                try store.claim("caf\u{E9}"), try store.claim("cafe\u{301}"), try store.claim(""),
            ]
            #expect(claims.allSatisfy { $0.isActive })
            #expect(Set(claims.map { ObjectIdentifier($0) }).count == 6)
        }
    }

    @Test func errorsCompareByCodeAndMessage() {
        let first = RestorationError(.writeFailed, message: "m", underlying: POSIXError(.EIO))
        let second = RestorationError(.writeFailed, message: "m")
        #expect(first == second)
        #expect(first != RestorationError(.readFailed, message: "m"))
        #expect(first.description == "RestorationError.writeFailed: m (underlying: \(POSIXError(.EIO)))")
        #expect(Set(RestorationError.Code.allCases.map(\.description)).count == RestorationError.Code.allCases.count)
    }
}
