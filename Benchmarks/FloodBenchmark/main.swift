// FloodBenchmark — memory and state-file writes of BlueZKit's managers under a flooding peer
// (Scripts/benchmark --only flood).
//
//   FloodBenchmark [NOTIFICATIONS] [WRITES] [TOGGLE_SECONDS]
//       Runs BlueZKitTesting's simulated bluetoothd in this process, on its own private bus,
//       and measures three floods, each with a fresh simulator:
//       1. A simulated peripheral sends NOTIFICATIONS (default 100000) notifications of 20 bytes
//          (StartNotify's PropertiesChanged signals), up to 100 a millisecond, to a CentralManager
//          whose peripheral delegate takes 200 µs per value. RssAnon (/proc/self/status) is
//          sampled every 5 ms from the start of the flood until the delegate has the last value;
//          prints "notification_flood_memory_growth_kib PEAK-BEFORE" and
//          "notification_flood_delivered N" (values the delegate got).
//       2. A simulated central subscribes to and unsubscribes from a characteristic of a
//          PeripheralManager created with a restore identifier, as fast as it can, for
//          TOGGLE_SECONDS (default 3); the state files written (renames into the store's
//          directory, seen by polling) during the toggling and one second after are counted:
//          "restoration_writes_per_second_under_ccc_toggle WRITES/WINDOW_SECONDS", "restoration_writes N" and
//          "ccc_toggles_per_second N".
//       3. A simulated central sends WRITES (default 50000) writes without response of 20 bytes
//          (4 at a time) to a PeripheralManager whose delegate takes 200 µs per write; RssAnon is
//          sampled as in 1 until the manager's queue has handled all it took and 20 s (the
//          request timeout) have passed since the flood began:
//          "write_flood_memory_growth_kib PEAK-BEFORE", "write_flood_delivered N".
//       The simulator's own memory is in the figures (same process); its share is small and
//       the same before and after a change of the library.

import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("FloodBenchmark: \(text)\n".utf8))
    exit(1)
}

func printLine(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

/// RssAnon of this process, in KiB.
func anonymousKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
        return Int(line.split(separator: " ")[1]) ?? 0
    }
    return 0
}

/// Samples RssAnon every 5 ms on its own thread until stopped; the peak.
final class PeakSampler: Sendable {
    private let state = Mutex((peak: 0, running: true))
    private let done = DispatchSemaphore(value: 0)
    init() {
        Thread.detachNewThread { [self] in
            while state.withLock({ $0.running }) {
                let now = anonymousKiB()
                state.withLock { $0.peak = max($0.peak, now) }
                usleep(5000)
            }
            done.signal()
        }
    }
    func stop() -> Int {
        state.withLock { $0.running = false }
        done.wait()
        return max(state.withLock { $0.peak }, anonymousKiB())
    }
}

func waitFor(_ what: String, seconds: Double = 120, _ condition: () -> Bool) async {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else { fail("timed out waiting for \(what)") }
        try? await Task.sleep(for: .milliseconds(2))
    }
}

let arguments = CommandLine.arguments.dropFirst().map { text -> Int in
    guard let count = Int(text), count > 0 else { fail("not a count: \(text)") }
    return count
}
let notifications = arguments.count > 0 ? arguments[0] : 100_000
let writes = arguments.count > 1 ? arguments[1] : 50_000
let toggleSeconds = arguments.count > 2 ? arguments[2] : 3

// MARK: - 1. Notifications to a slow central

final class SlowCentral: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "flood.central")
    let delivered = Atomic<Int>(0)
    let last = Mutex<Data?>(nil)
    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        usleep(200)
        delivered.add(1, ordering: .relaxed)
        last.withLock { $0 = characteristic.value }
    }
}

func notificationFlood() async throws {
    let bluez = try await SimulatedBlueZ.start()
    defer { bluez.stop() }
    let source = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
    let sensor = SimulatedPeripheral(
        address: "C0:FF:EE:00:00:01", name: "Flood", serviceUUIDs: ["180D"],
        services: [SimulatedService(uuid: "180D", characteristics: [source])])
    try bluez.addPeripheral(sensor)
    let delegate = SlowCentral()
    let central = CentralManager(
        delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
    await waitFor("powered on") { central.state == .poweredOn }
    var found: Peripheral?
    let discoveries = central.discoveries()
    central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
    for await discovery in discoveries {
        found = discovery.peripheral
        break
    }
    central.stopScan()
    guard let peripheral = found else { fail("no peripheral") }
    try await central.connect(to: peripheral)
    guard
        let service = try await peripheral.discoverServices(matching: nil).first(where: {
            $0.uuid == BluetoothUUID(0x180D)
        }),
        let measurement = try await peripheral.discoverCharacteristics(matching: [BluetoothUUID(0x2A37)], in: service)
            .first
    else { fail("no characteristic") }
    peripheral.delegate = delegate
    peripheral.setNotifyValue(true, for: measurement)
    await waitFor("subscribed") { source.isNotifying && measurement.isNotifying }
    func value(_ index: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt32(index).littleEndian) { Array($0) } + Array(repeating: 0xA5, count: 16)
    }
    // Warm-up: the paths and allocator arenas in use before the baseline.
    for index in 0..<2000 where !source.notify(value(index)) { fail("notify refused") }
    await waitFor("warm-up delivered") { delegate.last.withLock { $0 } == Data(value(1999)) }
    let before = anonymousKiB()
    let sampler = PeakSampler()
    let base = 1_000_000
    for index in 0..<notifications {
        guard source.notify(value(base + index)) else { fail("notify refused") }
        // 100 a millisecond at most (the bus carries fewer): many times what the delegate takes,
        // without piling the simulator's own signals up in this process.
        if index % 100 == 99 { try await Task.sleep(for: .milliseconds(1)) }
    }
    await waitFor("the last value delivered", seconds: 600) {
        delegate.last.withLock { $0 } == Data(value(base + notifications - 1))
    }
    let peak = sampler.stop()
    printLine("notification_flood_memory_growth_kib \(peak - before)")
    printLine("notification_flood_delivered \(delegate.delivered.load(ordering: .relaxed) - 2000)")
    withExtendedLifetime(central) {}
}

// MARK: - 2. CCC toggling on a manager with a restore identifier

final class Publisher: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "flood.peripheral")
    let writes = Atomic<Int>(0)
    let slow: Bool
    init(slow: Bool) { self.slow = slow }
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        if slow { usleep(200) }
        writes.add(requests.count, ordering: .relaxed)
    }
}

func publish(_ bluez: SimulatedBlueZ, _ delegate: Publisher, _ options: PeripheralManagerOptions) async
    -> PeripheralManager
{
    let manager = PeripheralManager(delegate: delegate, queue: delegate.queue, options: options)
    await waitFor("powered on") { manager.state == .poweredOn }
    let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
    service.characteristics = [
        MutableCharacteristic(
            type: BluetoothUUID(0xAB02), properties: [.writeWithoutResponse], value: nil, permissions: [.writeable]),
        MutableCharacteristic(type: BluetoothUUID(0xAB03), properties: [.notify], value: nil, permissions: []),
    ]
    manager.add(service)
    await waitFor("published") { bluez.adapters.first?.registeredApplications.count == 1 }
    return manager
}

/// Counts the state files written into `directory` (each atomic write renames a new file
/// over the old one): polls the files' inode and modification time every 0.2 ms on its own
/// thread. (inotify would be exact, but its instances are a scarce per-user resource.) Writes
/// closer together than the poll or the file system's time granularity count once: a lower bound.
final class RenameCounter: Sendable {
    let count = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    init(_ directory: String) {
        Thread.detachNewThread { [self] in
            var seen: [String: [Int]] = [:]
            while running.load(ordering: .relaxed) {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                for name in names where !name.hasPrefix(".") {
                    var info = stat()
                    guard stat(directory + "/" + name, &info) == 0 else { continue }
                    let key = [Int(info.st_ino), info.st_mtim.tv_sec, info.st_mtim.tv_nsec, Int(info.st_size)]
                    if seen[name] != key {
                        seen[name] = key
                        count.add(1, ordering: .relaxed)
                    }
                }
                usleep(200)
            }
        }
    }
    func stop() { running.store(false, ordering: .relaxed) }
}

func cccToggle() async throws {
    let bluez = try await SimulatedBlueZ.start()
    defer { bluez.stop() }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flood-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    guard mkdir(directory.path, 0o700) == 0 else { fail("mkdir \(directory.path)") }
    let renames = RenameCounter(directory.path)
    let options = PeripheralManagerOptions(
        restoreIdentifier: "flood", busAddress: bluez.busAddress,
        restorationStore: RestorationStore(directory: directory))
    let delegate = Publisher(slow: false)
    let manager = await publish(bluez, delegate, options)
    let central = try bluez.addCentral(address: "11:22:33:44:55:66")
    // The publication's own save first.
    try await Task.sleep(for: .milliseconds(1500))
    let start = renames.count.load(ordering: .relaxed)
    let began = ContinuousClock.now
    var toggles = 0
    while ContinuousClock.now - began < .seconds(toggleSeconds) {
        _ = try await central.subscribe(serviceUUID: "ABCD", characteristicUUID: "AB03")
        try await central.unsubscribe(serviceUUID: "ABCD", characteristicUUID: "AB03")
        toggles += 2
    }
    manager.queue.sync {}
    try await Task.sleep(for: .seconds(1))
    let written = renames.count.load(ordering: .relaxed) - start
    let window = (ContinuousClock.now - began) / .seconds(1)
    renames.stop()
    // Over the whole window: the toggling and the second after it, when the last state is written.
    printLine("restoration_writes_per_second_under_ccc_toggle \(Double(written) / window)")
    printLine("restoration_writes \(written)")
    printLine("ccc_toggles_per_second \(Double(toggles) / Double(toggleSeconds))")
    withExtendedLifetime(manager) {}
}

// MARK: - 3. Writes without response to a slow peripheral manager

func writeFlood() async throws {
    let bluez = try await SimulatedBlueZ.start()
    defer { bluez.stop() }
    let delegate = Publisher(slow: true)
    let manager = await publish(bluez, delegate, PeripheralManagerOptions(busAddress: bluez.busAddress))
    let central = try bluez.addCentral(address: "11:22:33:44:55:66")
    let payload = [UInt8](repeating: 0x5A, count: 20)
    for _ in 0..<2000 {
        try await central.write(serviceUUID: "ABCD", characteristicUUID: "AB02", value: payload, type: .command)
    }
    manager.queue.sync {}
    let warm = delegate.writes.load(ordering: .relaxed)
    let before = anonymousKiB()
    let sampler = PeakSampler()
    let began = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for lane in 0..<4 {
            group.addTask {
                for _ in stride(from: lane, to: writes, by: 4) {
                    try await central.write(
                        serviceUUID: "ABCD", characteristicUUID: "AB02", value: payload, type: .command)
                }
            }
        }
        try await group.waitForAll()
    }
    manager.queue.sync {}
    let remaining = Duration.seconds(21) - (ContinuousClock.now - began)
    if remaining > .zero { try await Task.sleep(for: remaining) }
    let peak = sampler.stop()
    printLine("write_flood_memory_growth_kib \(peak - before)")
    printLine("write_flood_delivered \(delegate.writes.load(ordering: .relaxed) - warm)")
    withExtendedLifetime(manager) {}
}

do {
    try await notificationFlood()
    try await cccToggle()
    try await writeFlood()
} catch {
    fail("\(error)")
}
