import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the serialized end-to-end suite: every test uses hci0 and hci1.
extension EndToEndTests {
    /// UUIDs of this test's own (hci0's bluetoothd may have cached the other tests' databases).
    static let judgedService = BluetoothUUID(string: "5A1E0003-B1E2-4C00-9E00-000000000003")
    static let judgedRead = BluetoothUUID(string: "5A1E0003-B1E2-4C00-9E00-0000000000A1")
    static let judgedWrite = BluetoothUUID(string: "5A1E0003-B1E2-4C00-9E00-0000000000A2")
    static let judgedNotify = BluetoothUUID(string: "5A1E0003-B1E2-4C00-9E00-0000000000A3")

    /// Our peripheral on hci1 judged by an outside central on hci0: `Scripts/guest/python-central.py`
    /// (dbus-python on the real bluetoothd) reads, writes, and subscribes twice, once by
    /// `StartNotify` and once by `AcquireNotify`.
    @Test(.loadScaledTimeLimit(minutes: 3)) func pythonCentralAgainstOurPeripheral() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let perPath = 4
        let written = Data([0xC0, 0xFF, 0xEE, 0x42])
        let server = E2EJudgedPeripheralDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        defer {
            server.stopNotifying()
            manager.stopAdvertising()
            manager.removeAllServices()
        }
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let service = MutableService(type: Self.judgedService, primary: true)
        service.characteristics = [server.readable, server.writable, server.notifying]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.log.contains("added") }
        #expect(server.log == ["added"])

        // Scan first: a virtual controller reports an advertisement when scanning or advertising starts.
        let central = try PythonCentral.start([
            "--adapter", "hci0", "--service", "\(Self.judgedService)", "--read", "\(Self.judgedRead)",
            "--write", "\(Self.judgedWrite)", "--write-value", written.hex, "--notify", "\(Self.judgedNotify)",
            "--count", "\(perPath)", "--timeout", "150",
        ])
        // Python importing dbus and gi in the emulated guest takes seconds, and much longer when
        // the host is busy (seen: over 30 s beside three Swift builds).
        try await central.waitForEvents("scanning", timeout: .seconds(90))
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [Self.judgedService]])
        try await waitUntil("advertising", timeout: .seconds(30)) { server.log.contains("advertising") }

        try await pollUntil("python-central exits", timeout: .seconds(180), diagnostics: central.diagnostics) {
            central.status != nil
        }
        #expect(central.status == 0, "\(central.diagnostics())")
        #expect(central.events("error").isEmpty, "\(central.diagnostics())")
        #expect(central.events("done").count == 1)

        // The read returned what the delegate answered; the write arrived.
        #expect(server.answeredReads.count == 1)
        #expect(central.events("read").map { $0["value"] as? String } == server.answeredReads.map(\.hex))
        #expect(central.events("write").first?["value"] as? String == written.hex)
        #expect(server.writes == [written])

        // Both subscriptions came and went, in order. The last unsubscription can follow the
        // script's exit (bluetoothd writes the CCC, or the link goes down, after the socket closed).
        try await waitUntil("unsubscribed twice", timeout: .seconds(30)) {
            server.log.filter { $0 != "added" && $0 != "advertising" }.count >= 4
        }
        #expect(
            server.log.filter { $0 != "added" && $0 != "advertising" } == [
                "subscribe", "unsubscribe", "subscribe", "unsubscribe",
            ])
        // One central did all of it: the subscriptions are attributed to the one that read and wrote.
        #expect(server.centrals.count == 6, "read, write, 2 subscribe, 2 unsubscribe: \(server.centrals)")
        #expect(Set(server.centrals).count == 1, "\(server.centrals)")

        // The values printed are ones we sent, consecutive and in order, on each path.
        let sent = server.sent.map(\.hex)
        var lastIndex = -1
        for path in ["start", "acquire"] {
            let values = central.events("notify").filter { $0["path"] as? String == path }
                .compactMap { $0["value"] as? String }
            #expect(values.count == perPath, "\(path): \(values)")
            let indices = values.compactMap { sent.firstIndex(of: $0) }
            #expect(indices.count == values.count, "\(path) printed values we never sent: \(values), sent \(sent)")
            #expect(indices.first.map { $0 > lastIndex } ?? false, "\(path) starts after the last path: \(indices)")
            #expect(
                indices == Array((indices.first ?? 0)..<(indices.first ?? 0) + indices.count), "\(path): \(indices)")
            lastIndex = indices.last ?? lastIndex
        }
        let acquired = try #require(central.events("acquired").first)
        #expect((acquired["mtu"] as? Int ?? 0) >= 23, "AcquireNotify's MTU: \(acquired)")
    }
}

/// Runs `Scripts/guest/python-central.py` (executable, `#!/usr/bin/python3`) as an ``ExampleProgram``,
/// which spawns with an empty signal mask and kills a leftover child with SIGKILL.
enum PythonCentral {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scripts/guest/python-central.py").path

    static func start(_ arguments: [String]) throws -> ExampleProgram {
        try ExampleProgram(path: script, arguments, busAddress: nil)
    }
}

/// A peripheral with a dynamic readable, a writable and a notifying characteristic; it sends a
/// counter to subscribers every 20 ms, from `didSubscribeTo` until `didUnsubscribeFrom`.
final class E2EJudgedPeripheralDelegate: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.judged")
    let readable = MutableCharacteristic(
        type: EndToEndTests.judgedRead, properties: [.read], value: nil, permissions: [.readable])
    let writable = MutableCharacteristic(
        type: EndToEndTests.judgedWrite, properties: [.write], value: nil, permissions: [.writeable])
    let notifying = MutableCharacteristic(
        type: EndToEndTests.judgedNotify, properties: [.notify], value: nil, permissions: [])

    private struct State {
        var log: [String] = []
        var answeredReads: [Data] = []
        var writes: [Data] = []
        var sent: [Data] = []
        var centrals: [UUID] = []
        var counter: UInt32 = 0x4A00_0001
    }
    private let state = Mutex(State())
    /// Only touched on `queue`.
    private var timer: (any DispatchSourceTimer)?
    var log: [String] { state.withLock { $0.log } }
    var answeredReads: [Data] { state.withLock { $0.answeredReads } }
    var writes: [Data] { state.withLock { $0.writes } }
    var sent: [Data] { state.withLock { $0.sent } }
    var centrals: [UUID] { state.withLock { $0.centrals } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        state.withLock { $0.log.append(error == nil ? "added" : "add failed: \(error!)") }
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        state.withLock { $0.log.append(error == nil ? "advertising" : "advertising failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        guard request.characteristic === readable else {
            return peripheral.respond(to: request, withResult: .readNotPermitted)
        }
        let answer = state.withLock {
            let answer = Data("judged read \($0.answeredReads.count + 1)".utf8)
            $0.answeredReads.append(answer)
            $0.centrals.append(request.central.identifier)
            return answer
        }
        request.value = Data(answer.dropFirst(request.offset))
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        guard first.characteristic === writable else {
            return peripheral.respond(to: first, withResult: .writeNotPermitted)
        }
        state.withLock {
            $0.writes.append(first.value ?? Data())
            $0.centrals.append(first.central.identifier)
        }
        peripheral.respond(to: first, withResult: .success)
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self, weak peripheral] in
            guard let self, let peripheral else { return }
            self.sendNext(peripheral)
        }
        state.withLock {
            $0.log.append(characteristic === notifying ? "subscribe" : "subscribe \(characteristic.uuid)")
            $0.centrals.append(central.identifier)
        }
        self.timer?.cancel()
        self.timer = timer
        timer.schedule(deadline: .now(), repeating: .milliseconds(20))
        timer.resume()
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        state.withLock {
            $0.log.append(characteristic === notifying ? "unsubscribe" : "unsubscribe \(characteristic.uuid)")
            $0.centrals.append(central.identifier)
        }
        timer?.cancel()
        timer = nil
    }
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) { sendNext(peripheral) }

    /// Sends the next counter value; it counts as sent when `updateValue` took it.
    private func sendNext(_ peripheral: PeripheralManager) {
        let value = state.withLock { state in withUnsafeBytes(of: state.counter.bigEndian) { Data($0) } }
        guard peripheral.updateValue(value, for: notifying, onSubscribedCentrals: nil) else { return }
        state.withLock {
            $0.sent.append(value)
            $0.counter += 1
        }
    }

    /// Stops sending (from outside `queue`).
    func stopNotifying() {
        queue.sync {
            timer?.cancel()
            timer = nil
        }
    }
}

extension Data {
    /// Lower-case hex, as python-central prints values.
    fileprivate var hex: String { map { String(format: "%02x", $0) }.joined() }
}
