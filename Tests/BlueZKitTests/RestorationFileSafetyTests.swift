import BlueZKitTesting
import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing

@testable import BlueZKit

/// The restoration file is read only when it is safe to: no symbolic link, no FIFO or device, a
/// bounded size, a directory of this user that nobody else writes to; otherwise the manager
/// reports `unsafeFile` and starts fresh — it never hangs or reads without end.
@Suite(.timeLimit(.minutes(5))) struct RestorationFileSafetyTests {
    struct Sample: Codable, Equatable {
        var value: Int
    }

    static let identifier = "door-lock"

    /// A fresh store directory (mode 0700) for one test, removed afterwards.
    static func withStore(_ body: (RestorationStore, String) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "RestorationFileSafetyTests-\(UUID().uuidString)", isDirectory: true)
        #expect(mkdir(root.path, 0o700) == 0)
        #expect(chmod(root.path, 0o700) == 0)
        defer { try? FileManager.default.removeItem(at: root) }
        let store = RestorationStore(directory: root)
        try body(store, root.path + "/" + RestorationStore.fileName(for: identifier))
    }

    /// Loads the sample and returns the error's code (nil when it loaded).
    static func loadError(_ store: RestorationStore) -> RestorationError.Code? {
        do {
            _ = try store.load(Sample.self, role: .central, for: identifier)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        try Self.withStore { store, path in
            #expect(mkfifo(path, 0o600) == 0)
            #expect(Self.loadError(store) == .unsafeFile)
            #expect(FileManager.default.fileExists(atPath: path), "left where it is")
        }
    }

    @Test func aSymbolicLinkIsRefused() throws {
        try Self.withStore { store, path in
            try store.save(Sample(value: 1), role: .central, for: "elsewhere")
            let target = store.directory.path + "/" + RestorationStore.fileName(for: "elsewhere")
            // A valid state of this identifier behind the link: only the link itself is wrong.
            try store.save(Sample(value: 2), role: .central, for: Self.identifier)
            #expect(rename(path, target) == 0)
            #expect(symlink(target, path) == 0)
            #expect(Self.loadError(store) == .unsafeFile)
        }
    }

    @Test func aLinkToDevZeroIsRefused() throws {
        try Self.withStore { store, path in
            #expect(symlink("/dev/zero", path) == 0)
            #expect(Self.loadError(store) == .unsafeFile)
        }
    }

    @Test func aFileLargerThanTheLimitIsRefused() throws {
        try Self.withStore { store, path in
            try store.save(Sample(value: 3), role: .central, for: Self.identifier)
            // Still a valid state once its whitespace is skipped: only the size is wrong.
            var data = try Data(contentsOf: URL(fileURLWithPath: path))
            data.append(Data(repeating: 0x20, count: RestorationStore.maximumFileSize))
            try data.write(to: URL(fileURLWithPath: path))
            #expect(Self.loadError(store) == .unsafeFile)
        }
    }

    @Test(arguments: [0o770 as mode_t, 0o707, 0o777])
    func aDirectoryOthersMayWriteToIsRefused(mode: mode_t) throws {
        try Self.withStore { store, _ in
            try store.save(Sample(value: 4), role: .central, for: Self.identifier)
            #expect(chmod(store.directory.path, mode) == 0)
            #expect(Self.loadError(store) == .unsafeFile)
            #expect(chmod(store.directory.path, 0o700) == 0)
            #expect(try store.load(Sample.self, role: .central, for: Self.identifier) == Sample(value: 4))
        }
    }

    @Test(.enabled(if: geteuid() == 0, "chown needs root"))
    func aDirectoryOfAnotherUserIsRefused() throws {
        try Self.withStore { store, _ in
            try store.save(Sample(value: 5), role: .central, for: Self.identifier)
            #expect(chown(store.directory.path, 65_534, 65_534) == 0)
            #expect(Self.loadError(store) == .unsafeFile)
        }
    }

    /// A chain of included services longer than the bound is refused as unreadable (and moved aside).
    @Test func aDeepIncludeChainIsRefused() throws {
        try Self.withStore { store, path in
            func record(depth: Int) -> PeripheralRestorationRecord {
                PeripheralRestorationRecord(
                    services: (0..<depth).map { index in
                        PeripheralRestorationRecord.Service(
                            uuid: "0000AB\(String(format: "%02X", index))-0000-1000-8000-00805F9B34FB",
                            isPrimary: true, characteristics: [], includes: index + 1 < depth ? [index + 1] : nil)
                    })
            }
            let limit = PeripheralRestorationRecord.maximumIncludeDepth
            try store.save(record(depth: limit), role: .peripheral, for: Self.identifier)
            #expect(
                try store.load(PeripheralRestorationRecord.self, role: .peripheral, for: Self.identifier)?.services
                    .count == limit)
            try store.save(record(depth: limit + 1), role: .peripheral, for: Self.identifier)
            #expect(throws: RestorationError.self) {
                _ = try store.load(PeripheralRestorationRecord.self, role: .peripheral, for: Self.identifier)
            }
            #expect(FileManager.default.fileExists(atPath: path + ".unreadable"))
        }
    }

    /// Services that include each other in a cycle (in a hand-edited or hostile file) lose the
    /// edges that close it when rebuilt, so they are freed (Fuzz/regressions/restoration/leak-cdd7…).
    @Test func includeCyclesInTheFileAreDroppedWhenServicesAreRebuilt() {
        weak var first: MutableService?
        weak var second: MutableService?
        do {
            let services = PeripheralManager.restoredServices([
                PeripheralRestorationRecord.Service(
                    uuid: "180D", isPrimary: true, characteristics: [], includes: [0, 1]),
                PeripheralRestorationRecord.Service(uuid: "180F", isPrimary: true, characteristics: [], includes: [0]),
            ])
            #expect(services.count == 2)
            first = services.first
            second = services.last
            #expect(services[0].includedServices?.count == 1)
            #expect(services[0].includedServices?.first === services[1])
            #expect(services[1].includedServices?.isEmpty == true)
        }
        #expect(first == nil)
        #expect(second == nil)
    }

    /// Deeply nested JSON within the size limit is an unreadable file, not a crash.
    @Test func deeplyNestedJSONIsUnreadable() throws {
        try Self.withStore { store, path in
            let depth = 100_000
            let json =
                #"{"format":"bluezkit-restoration-state","version":1,"role":"central","identifier":"door-lock","payload":"#
                + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"
            #expect(FileManager.default.createFile(atPath: path, contents: Data(json.utf8)))
            #expect(chmod(path, 0o600) == 0)
            #expect(Self.loadError(store) == .unreadable)
        }
    }

    /// Through a manager: a FIFO where its state should be does not block `init`, and
    /// `restorationError` says why nothing was restored.
    @Test func aManagerReportsAnUnsafeFileAndStartsFresh() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        try Self.withStore { store, path in
            #expect(mkfifo(path, 0o600) == 0)
            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "test.restoration-safety"),
                options: CentralManagerOptions(
                    restoreIdentifier: Self.identifier, busAddress: bluez.busAddress, restorationStore: store))
            #expect(central.restorationError?.code == .unsafeFile)
        }
    }
}
