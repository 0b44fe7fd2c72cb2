import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// Bumble centrals (`Scripts/guest/bumble_long_attribute_client.py`) asking our peripheral, a
/// ``PeripheralManager`` in-process on the Bumble-backed adapter, for what one ATT PDU does not
/// hold: long reads (Read Blob), a read beyond the end, a long write (Prepare Write and Execute
/// Write), and notifications at the MTU's limit, on a link of MTU 23 and one of 517.
/// In the serialized end-to-end suite.
extension EndToEndTests {
    static let longAttributeService = BluetoothUUID(string: "5A1E0401-B1E2-4C00-9E00-000000000001")
    static let longAttributeRead = BluetoothUUID(string: "5A1E0402-B1E2-4C00-9E00-000000000001")
    static let longAttributeWrite = BluetoothUUID(string: "5A1E0403-B1E2-4C00-9E00-000000000001")
    static let longAttributeNotify = BluetoothUUID(string: "5A1E0404-B1E2-4C00-9E00-000000000001")

    /// On a link that stays at ATT MTU 23, Bumble reads a 100-byte value: our delegate gets one
    /// read per ATT request, at offsets 0, 22, 44, 66 and 88 (bluetoothd calls `ReadValue` with
    /// the `offset` of each Read Blob Request, as Core Bluetooth calls `didReceiveRead` per
    /// request), and Bumble assembles exactly the value. A Read Blob beyond the end (offset 101)
    /// reaches the delegate with that offset; it answers ``ATTError/Code/invalidOffset`` and
    /// Bumble gets ATT's Invalid Offset (0x07). Bumble's long write of 300 bytes (17 Prepare
    /// Writes of 18 bytes, then Execute Write) reaches the delegate whole.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func bumbleReadsAndWritesLongValuesOfOurPeripheral() async throws {
        let (manager, server, _) = try await Self.publishLongAttributeService()
        defer {
            manager.stopAdvertising()
            manager.removeAllServices()
        }
        let client = try await Self.startLongAttributeClient(manager, ["--mtu", "23", "--write-length", "300"])
        try await pollUntil("Bumble's client exits", timeout: .seconds(150), diagnostics: client.diagnostics) {
            client.status != nil
        }
        #expect(client.status == 0, "\(client.diagnostics())")
        #expect(client.events("mtu").first?["mtu"] as? Int == 23, "\(client.diagnostics())")

        let read = client.events("read").first
        #expect(read?["value"] as? String == LongAttributePeripheral.longValue.hexString, "\(client.diagnostics())")
        let beyond = client.events("readBeyondEnd").first
        #expect(beyond?["offset"] as? Int == 101)
        #expect(beyond?["error"] as? Int == 0x07, "Invalid Offset: \(client.diagnostics())")
        #expect(server.readOffsets == [0, 22, 44, 66, 88, 101], "\(server.readOffsets)")

        let written = client.events("longWrite").first
        #expect(written?["parts"] as? Int == 17)
        #expect(written.map { $0["error"] is NSNull } == true, "\(client.diagnostics())")
        let sent = Data((0..<300).map { UInt8($0 % 256) })
        let writes = server.writes
        #expect(LongAttributePeripheral.assemble(writes) == sent, "\(writes.map { ($0.offset, $0.value.count) })")
        // bluetoothd joins the contiguous parts of a long write into one WriteValue (offset 0,
        // 300 bytes) when the central executes the queue: the delegate gets one request.
        #expect(writes.map(\.offset) == [0] && writes.map(\.count) == [1], "\(writes.map { ($0.offset, $0.count) })")
    }

    /// `maximumUpdateValueLength` follows the ATT MTU the central negotiated: 20 on a link
    /// that stays at 23, 514 where Bumble exchanged 517 (bluetoothd's own maximum is 517 as
    /// well). `updateValue` sends a value of that length (at most 512) whole, and refuses (returns
    /// `false`, sends nothing) one byte more, as Core Bluetooth does.
    @Test(
        .enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4),
        arguments: [23, 517])
    func ourUpdatesFollowTheMTUABumbleCentralNegotiated(mtu: Int) async throws {
        let (manager, server, notify) = try await Self.publishLongAttributeService()
        defer {
            manager.stopAdvertising()
            manager.removeAllServices()
        }
        let client = try await Self.startLongAttributeClient(
            manager, ["--mtu", "\(mtu)", "--write-length", "0", "--notify-count", "1"])
        try await pollUntil("Bumble subscribed", timeout: .seconds(120), diagnostics: client.diagnostics) {
            !server.subscribed.isEmpty
        }
        let negotiated = try #require(client.events("mtu").first?["mtu"] as? Int)
        #expect(negotiated == mtu, "\(client.diagnostics())")
        let central = try #require(server.subscribed.first)
        #expect(central.maximumUpdateValueLength == mtu - 3)
        #expect(server.readCentrals.allSatisfy { $0.maximumUpdateValueLength == mtu - 3 })
        let longest = min(central.maximumUpdateValueLength, 512)
        let tooLong = Data(repeating: 0xEE, count: longest + 1)
        #expect(!manager.updateValue(tooLong, for: notify, onSubscribedCentrals: nil), "refused, not cut")
        let whole = Data((0..<longest).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try await waitUntil("sent \(longest) bytes") {
            manager.updateValue(whole, for: notify, onSubscribedCentrals: nil)
        }
        try await pollUntil("Bumble's client exits", timeout: .seconds(60), diagnostics: client.diagnostics) {
            client.status != nil
        }
        #expect(client.status == 0, "\(client.diagnostics())")
        let got = client.events("notify")
        #expect(got.map { $0["length"] as? Int } == [longest], "only the value that fits: \(client.diagnostics())")
        #expect(got.first?["value"] as? String == whole.hexString)
    }

    /// Our peripheral on the Bumble-backed adapter, published: a readable characteristic that
    /// the delegate answers, a writable one and one that notifies.
    static func publishLongAttributeService() async throws -> (
        PeripheralManager, LongAttributePeripheral, MutableCharacteristic
    ) {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let server = LongAttributePeripheral()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: adapter))
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let read = MutableCharacteristic(
            type: longAttributeRead, properties: [.read], value: nil, permissions: [.readable])
        let write = MutableCharacteristic(
            type: longAttributeWrite, properties: [.write], value: nil, permissions: [.writeable])
        let notify = MutableCharacteristic(
            type: longAttributeNotify, properties: [.notify], value: nil, permissions: [])
        let service = MutableService(type: longAttributeService, primary: true)
        service.characteristics = [read, write, notify]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.added }
        return (manager, server, notify)
    }

    /// Starts Bumble's client with `arguments`, then advertises the service for it.
    static func startLongAttributeClient(_ manager: PeripheralManager, _ arguments: [String]) async throws
        -> ExampleProgram
    {
        let client = try BumblePeer.start(
            "bumble_long_attribute_client.py",
            [
                "--service", "\(longAttributeService)", "--long", "\(longAttributeRead)",
                "--write", "\(longAttributeWrite)", "--notify", "\(longAttributeNotify)", "--timeout", "180",
            ] + arguments)
        try await client.waitForEvents("scanning", timeout: .seconds(90))
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [longAttributeService]])
        try await waitUntil("advertising", timeout: .seconds(30)) { manager.isAdvertising }
        return client
    }
}

/// The delegate of the long-attribute peripheral: answers reads of ``longValue`` from the
/// request's offset (``ATTError/Code/invalidOffset`` beyond its end, as an app following Apple's
/// guide does), accepts every write, and records what it was asked.
final class LongAttributePeripheral: PeripheralManagerDelegate, @unchecked Sendable {
    /// 100 bytes: 0x40, 0x41, …
    static let longValue = Data((0..<100).map { UInt8(0x40 + $0) })

    struct Write: Sendable {
        let offset: Int
        let value: Data
        /// How many requests came in the same `didReceiveWrite` call.
        let count: Int
    }

    let queue = DispatchQueue(label: "e2e.long-attribute")
    private let state = Mutex<(added: Bool, reads: [(Int, Central)], writes: [Write], subscribed: [Central])>(
        (false, [], [], []))
    var added: Bool { state.withLock { $0.added } }
    var readOffsets: [Int] { state.withLock { $0.reads.map(\.0) } }
    var readCentrals: [Central] { state.withLock { $0.reads.map(\.1) } }
    var writes: [Write] { state.withLock { $0.writes } }
    var subscribed: [Central] { state.withLock { $0.subscribed } }

    /// The value the writes make, each at its offset.
    static func assemble(_ writes: [Write]) -> Data {
        var value = Data()
        for write in writes {
            if value.count < write.offset + write.value.count {
                value.append(Data(count: write.offset + write.value.count - value.count))
            }
            value.replaceSubrange(write.offset..<write.offset + write.value.count, with: write.value)
        }
        return value
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        state.withLock { $0.added = error == nil }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        state.withLock { $0.reads.append((request.offset, request.central)) }
        guard request.offset <= Self.longValue.count else {
            return peripheral.respond(to: request, withResult: .invalidOffset)
        }
        request.value = Self.longValue.subdata(in: request.offset..<Self.longValue.count)
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        state.withLock { state in
            state.writes += requests.map { Write(offset: $0.offset, value: $0.value ?? Data(), count: requests.count) }
        }
        if let first = requests.first { peripheral.respond(to: first, withResult: .success) }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        state.withLock { $0.subscribed.append(central) }
    }
}

extension Data {
    /// Lowercase hexadecimal, as the Bumble peers print values.
    fileprivate var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
