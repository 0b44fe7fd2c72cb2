// ScanMemoryBenchmark — resident memory of a scanning CentralManager (Scripts/benchmark).
//
//   ScanMemoryBenchmark scan [ADVERTISEMENTS] [DEVICES] [WARMUP]
//       Starts `ScanMemoryBenchmark serve` as a child process (the simulated bluetoothd
//       on its own private bus, so that its memory is not counted), creates a
//       CentralManager on that bus, scans with allowDuplicates, lets the child add
//       DEVICES peripherals (default 1000; each reported once as it appears), then
//       has it send ADVERTISEMENTS advertisements (default 100000) round-robin over
//       the devices in batches of DEVICES, each with a new RSSI and new manufacturer
//       data. Every batch is waited for: the delegate must have received exactly one
//       didDiscover per advertisement before the next batch goes out, so that the
//       buses never hold a backlog. VmRSS and RssAnon (/proc/self/status) are
//       taken after WARMUP advertisements (default 10000) and at the end; prints "rss_kib BEFORE AFTER GROWTH", "anon_kib BEFORE AFTER GROWTH",
//       "discoveries N", "advertisements_per_s X" and one "sample" line per 10,000
//       (VmRSS, RssAnon and the number of threads).
//   ScanMemoryBenchmark distinct [ADVERTISEMENTS] [WARMUP] [TIMEOUT_MS] [LIMIT]
//       Never-repeating addresses, as phones that rotate their private address: the child
//       runs the simulator with bluetoothd's temporary timeout set to TIMEOUT_MS (default
//       1000; bluetoothd's default is 30 s, see below) and sends ADVERTISEMENTS advertisements
//       (default 1000000), each from a new address: a new peripheral is added (its first
//       advertisement), then taken off the air (SimulatedBlueZ.removePeripheral), leaving
//       its device to the timeout. The central scans without duplicates (each device is
//       reported once). Batches of 1000, each waited for as in `scan`. Memory is read at
//       two quiet points, after WARMUP advertisements (default 100000) and at the end:
//       the child waits until bluetoothd removed every device ("drain"), then adds one
//       marker device, whose report shows that the central has handled every removal
//       before it. Prints the lines of `scan`, plus "simulator_rss_kib BEFORE AFTER
//       GROWTH" and "simulator_anon_kib ..." (the child's own memory at the same points)
//       and "peak_devices N" (the most devices bluetoothd held at a batch's end);
//       "discoveries" counts the three markers (start, warm-up, end) too.
//       The timeout stands for bluetoothd's 30 s at a much higher rate of new addresses:
//       about rate × timeout devices are alive at a time, as many as a busy place holds
//       within 30 s. A batch waits until bluetoothd holds at most LIMIT (default 3000) less
//       the batch: the offered rate adapts, so that a stall of the machine (late timers)
//       does not raise the high-water mark of live devices, which the allocator keeps, after
//       the warm-up. The warm-up must last several timeouts.
//   ScanMemoryBenchmark serve [TIMEOUT_MS]
//       The child (TIMEOUT_MS: bluetoothd's temporary timeout, none by default): prints
//       "address ADDRESS", then obeys lines on standard input — "add N" (waits until the
//       adapter discovers, adds N peripherals), "advertise K", "limit N" (for "fresh"),
//       "fresh K" (waits until bluetoothd holds at most the limit less K devices, then K
//       advertisements from new addresses, as above), "drain S" (waits up to S seconds
//       until bluetoothd holds no device) — answering "ok" to each, and "memory 0", answered "memory RSS
//       ANON DEVICES" (its own VmRSS and RssAnon in KiB, and bluetoothd's device count);
//       exits at the end of its input.

import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("ScanMemoryBenchmark: \(text)\n".utf8))
    exit(1)
}

func printLine(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func number(_ text: String) -> Int {
    guard let n = Int(text), n >= 0 else { fail("not a count: \(text)") }
    return n
}

/// One line from a file descriptor (nil at its end), read byte by byte: the volume is tiny.
func readLine(fd: Int32) -> String? {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while true {
        let n = read(fd, &byte, 1)
        if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

// MARK: - serve (the child)

func serve(temporaryTimeoutMilliseconds: Int?) {
    let started = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var simulator: SimulatedBlueZ?
    let options = SimulatedBlueZ.Options(temporaryTimeout: temporaryTimeoutMilliseconds.map { .milliseconds($0) })
    Task.detached {
        do { simulator = try await SimulatedBlueZ.start(options: options) } catch {
            fail("cannot start the simulator: \(error)")
        }
        started.signal()
    }
    started.wait()
    guard let bluez = simulator, let adapter = bluez.adapters.first else { fail("no simulator") }
    // Stops the simulator's dbus-daemon too, which an exit would leave running.
    func stopAndFail(_ text: String) -> Never {
        bluez.stop()
        fail(text)
    }
    printLine("address \(bluez.busAddress)")
    var peripherals: [SimulatedPeripheral] = []
    var cursor = 0
    var fresh = 0
    var limit = Int.max
    func awaitDiscovering() {
        let deadline = DispatchTime.now() + .seconds(30)
        while !adapter.isDiscovering {
            guard DispatchTime.now() < deadline else { stopAndFail("serve: the adapter never started discovering") }
            usleep(2000)
        }
    }
    while let line = readLine(fd: 0) {
        let words = line.split(separator: " ")
        guard words.count == 2, let n = Int(words[1]) else { stopAndFail("serve: bad command '\(line)'") }
        switch words[0] {
        case "add":
            awaitDiscovering()
            for _ in 0..<n {
                let index = peripherals.count
                let address = String(format: "C0:00:00:00:%02X:%02X", index >> 8 & 0xFF, index & 0xFF)
                let peripheral = SimulatedPeripheral(
                    address: address, addressType: .random, name: "Sensor \(index)", rssi: -60, txPower: 4,
                    serviceUUIDs: ["180D", "180F"], manufacturerData: [0xFFFF: [0, 0, UInt8(index & 0xFF)]],
                    serviceData: ["FE9F": [1, 2, 3]])
                do { try bluez.addPeripheral(peripheral, to: adapter) } catch { stopAndFail("serve: \(error)") }
                peripherals.append(peripheral)
            }
        case "advertise":
            guard !peripherals.isEmpty else { stopAndFail("serve: no peripherals") }
            for _ in 0..<n {
                let peripheral = peripherals[cursor % peripherals.count]
                let round = cursor / peripherals.count
                // A new RSSI and new data each time (consecutive rounds always differ).
                peripheral.rssi = Int16(-40 - round % 50)
                peripheral.manufacturerData = [
                    0xFFFF: [UInt8(truncatingIfNeeded: round), UInt8(truncatingIfNeeded: round >> 8), 7, 7, 7, 7]
                ]
                peripheral.advertise()
                cursor += 1
            }
        case "limit":
            limit = n
        case "fresh":
            awaitDiscovering()
            // The offered rate adapts: no more than `limit` devices alive with this batch.
            let deadline = DispatchTime.now() + .seconds(60)
            while bluez.deviceCount + n > limit {
                guard DispatchTime.now() < deadline else { stopAndFail("serve: bluetoothd keeps its devices") }
                usleep(1000)
            }
            for _ in 0..<n {
                // A static random address (two top bits set) per advertisement: 2^24 of them.
                let address = String(
                    format: "C1:00:00:%02X:%02X:%02X", fresh >> 16 & 0xFF, fresh >> 8 & 0xFF, fresh & 0xFF)
                let peripheral = SimulatedPeripheral(
                    address: address, addressType: .random, name: "Phone \(fresh)", rssi: Int16(-40 - fresh % 50),
                    manufacturerData: [0x004C: [0x10, 0x05, UInt8(truncatingIfNeeded: fresh), 0x1C, 7, 7]])
                // Added while the adapter discovers: reported at once, its one advertisement.
                do { try bluez.addPeripheral(peripheral, to: adapter) } catch { stopAndFail("serve: \(error)") }
                bluez.removePeripheral(peripheral)
                fresh += 1
            }
        case "drain":
            let deadline = DispatchTime.now() + .seconds(n)
            while bluez.deviceCount > 0 {
                guard DispatchTime.now() < deadline else { stopAndFail("serve: \(bluez.deviceCount) devices remain") }
                usleep(5000)
            }
        case "memory":
            printLine("memory \(residentKiB()) \(heapKiB()) \(bluez.deviceCount)")
            continue
        default:
            stopAndFail("serve: bad command '\(line)'")
        }
        printLine("ok")
    }
    bluez.stop()
    exit(0)
}

// MARK: - scan (the measured process)

final class CountingDelegate: CentralManagerDelegate, Sendable {
    let discoveries = Atomic<Int>(0)
    let poweredOn = Atomic<Bool>(false)
    let checksum = Atomic<Int>(0)

    func centralManagerDidUpdateState(_ central: CentralManager) {
        if central.state == .poweredOn { poweredOn.store(true, ordering: .releasing) }
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        // Touch what an application would read, so that nothing is skipped.
        let bytes = advertisementData.manufacturerData?.count ?? 0
        checksum.add(RSSI &+ bytes &+ (peripheral.name?.utf8.count ?? 0), ordering: .relaxed)
        discoveries.add(1, ordering: .releasing)
    }
}

/// VmRSS of this process in KiB.
func residentKiB() -> Int { statusKiB("VmRSS:") }

/// RssAnon (anonymous memory: the heaps, without mapped files) in KiB.
func heapKiB() -> Int { statusKiB("RssAnon:") }

/// A number field of /proc/self/status ("kB" for sizes).
func statusKiB(_ field: String) -> Int {
    let fd = open("/proc/self/status", O_RDONLY)
    guard fd >= 0 else { fail("cannot open /proc/self/status") }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 8192)
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    let text = String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field) {
        if let value = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first, let kib = Int(value) {
            return kib
        }
    }
    fail("no \(field) in /proc/self/status")
}

func waitFor(_ what: String, seconds: Double, _ condition: () -> Bool) {
    let deadline = DispatchTime.now() + .milliseconds(Int(seconds * 1000))
    while !condition() {
        guard DispatchTime.now() < deadline else { fail("timed out waiting for \(what)") }
        usleep(500)
    }
}

/// The child process: the simulator on its own bus, so that its memory is not counted.
struct SimulatorProcess {
    let child = Process()
    let toChild = Pipe()
    let fromChild = Pipe()
    let address: String

    init(arguments: [String]) {
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = ["serve"] + arguments
        child.standardInput = toChild
        child.standardOutput = fromChild
        do { try child.run() } catch { fail("cannot start the simulator process: \(error)") }
        guard let first = readLine(fd: fromChild.fileHandleForReading.fileDescriptor), first.hasPrefix("address ")
        else { fail("the simulator did not start") }
        address = String(first.dropFirst("address ".count))
    }

    func command(_ text: String) {
        var line = Array((text + "\n").utf8)
        let input = toChild.fileHandleForWriting.fileDescriptor
        guard line.withUnsafeMutableBytes({ write(input, $0.baseAddress, $0.count) }) == line.count else {
            fail("the simulator process is gone")
        }
    }

    /// The child's answer to the last command.
    func answer(_ what: String) -> String {
        guard let line = readLine(fd: fromChild.fileHandleForReading.fileDescriptor) else {
            fail("the simulator failed during \(what)")
        }
        return line
    }

    func awaitOK(_ what: String) {
        guard answer(what) == "ok" else { fail("the simulator failed during \(what)") }
    }

    /// The child's VmRSS and RssAnon in KiB, and how many devices bluetoothd holds.
    func memory() -> (rss: Int, heap: Int, devices: Int) {
        command("memory 0")
        let words = answer("memory").split(separator: " ")
        guard words.count == 4, words[0] == "memory", let rss = Int(words[1]), let heap = Int(words[2]),
            let devices = Int(words[3])
        else { fail("the simulator answered no memory figures") }
        return (rss, heap, devices)
    }

    /// Ends the child's input and waits for it.
    func finish() {
        try? toChild.fileHandleForWriting.close()
        child.waitUntilExit()
    }
}

func scan(advertisements: Int, devices: Int, warmUp: Int) {
    guard devices > 0, advertisements % devices == 0, warmUp % devices == 0, warmUp < advertisements else {
        fail("ADVERTISEMENTS and WARMUP must be multiples of DEVICES, WARMUP < ADVERTISEMENTS")
    }
    let simulator = SimulatorProcess(arguments: [])
    let command = simulator.command
    let awaitOK = simulator.awaitOK
    let address = simulator.address

    let delegate = CountingDelegate()
    let queue = DispatchQueue(label: "benchmark.central")
    let central = CentralManager(delegate: delegate, queue: queue, options: CentralManagerOptions(busAddress: address))
    waitFor("poweredOn", seconds: 30) { delegate.poweredOn.load(ordering: .acquiring) }
    central.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))

    command("add \(devices)")
    awaitOK("add")
    waitFor("the first \(devices) discoveries", seconds: 60) {
        delegate.discoveries.load(ordering: .acquiring) >= devices
    }
    let initial = delegate.discoveries.load(ordering: .acquiring)
    guard initial == devices else { fail("\(initial) discoveries of \(devices) new devices") }

    var sent = 0
    var before = (rss: 0, heap: 0)
    let clock = ContinuousClock()
    var measuredStart = clock.now
    while sent < advertisements {
        command("advertise \(devices)")
        awaitOK("advertise")
        sent += devices
        let expected = devices + sent
        waitFor("\(expected) discoveries", seconds: 60) { delegate.discoveries.load(ordering: .acquiring) >= expected }
        if sent % 10_000 == 0 {
            printLine(
                "sample advertisements \(sent) rss_kib \(residentKiB()) anon_kib \(heapKiB()) threads \(statusKiB("Threads:"))"
            )
        }
        if sent == warmUp {
            before = (residentKiB(), heapKiB())
            measuredStart = clock.now
        }
    }
    let elapsed = clock.now - measuredStart
    // Let anything still queued land before the last reading.
    usleep(200_000)
    let total = delegate.discoveries.load(ordering: .acquiring)
    let after = (rss: residentKiB(), heap: heapKiB())
    guard total == devices + advertisements else {
        fail("the delegate got \(total) discoveries, expected \(devices + advertisements)")
    }
    central.stopScan()
    simulator.finish()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    printLine("rss_kib \(before.rss) \(after.rss) \(after.rss - before.rss)")
    printLine("anon_kib \(before.heap) \(after.heap) \(after.heap - before.heap)")
    printLine("discoveries \(total) checksum \(delegate.checksum.load(ordering: .relaxed))")
    printLine("advertisements_per_s \(Int(Double(advertisements - warmUp) / seconds))")
    withExtendedLifetime(central) {}
    exit(0)
}

// MARK: - distinct (the measured process, never-repeating addresses)

func distinct(advertisements: Int, warmUp: Int, timeoutMilliseconds: Int, limit: Int) {
    let batch = 1000
    guard advertisements % batch == 0, warmUp % batch == 0, warmUp < advertisements, timeoutMilliseconds > 0,
        limit >= batch + 1
    else {
        fail(
            "ADVERTISEMENTS and WARMUP must be multiples of \(batch), WARMUP < ADVERTISEMENTS, TIMEOUT_MS > 0, LIMIT > \(batch)"
        )
    }
    let simulator = SimulatorProcess(arguments: [String(timeoutMilliseconds)])
    simulator.command("limit \(limit)")
    simulator.awaitOK("limit")
    let delegate = CountingDelegate()
    let queue = DispatchQueue(label: "benchmark.central")
    let central = CentralManager(
        delegate: delegate, queue: queue, options: CentralManagerOptions(busAddress: simulator.address))
    waitFor("poweredOn", seconds: 30) { delegate.poweredOn.load(ordering: .acquiring) }
    central.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: false))

    var expected = 0
    /// Sends `count` advertisements from new addresses and waits until each was reported.
    func fresh(_ count: Int) {
        simulator.command("fresh \(count)")
        simulator.awaitOK("fresh")
        expected += count
        waitFor("\(expected) discoveries", seconds: 60) {
            delegate.discoveries.load(ordering: .acquiring) >= expected
        }
    }
    /// A quiet point: bluetoothd removed every device, and the central has handled the removals
    /// (the marker's report comes after them on the bus). Returns (central, simulator) memory.
    func quietMemory() -> (central: (rss: Int, heap: Int), simulator: (rss: Int, heap: Int)) {
        simulator.command("drain \(max(30, 10 * timeoutMilliseconds / 1000))")
        simulator.awaitOK("drain")
        fresh(1)
        let child = simulator.memory()
        return ((residentKiB(), heapKiB()), (child.rss, child.heap))
    }

    var sent = 0
    var peak = 0
    var before = quietMemory()
    let clock = ContinuousClock()
    var measuredStart = clock.now
    while sent < advertisements {
        fresh(batch)
        sent += batch
        let child = simulator.memory()
        peak = max(peak, child.devices)
        if sent % 10000 == 0 || sent == warmUp {
            printLine(
                "sample advertisements \(sent) rss_kib \(residentKiB()) anon_kib \(heapKiB()) threads \(statusKiB("Threads:")) simulator_rss_kib \(child.rss) devices \(child.devices)"
            )
        }
        if sent == warmUp {
            before = quietMemory()
            measuredStart = clock.now
        }
    }
    let elapsed = clock.now - measuredStart
    let after = quietMemory()
    let total = delegate.discoveries.load(ordering: .acquiring)
    // Each advertisement, and the three markers.
    guard total == advertisements + 3, total == expected else {
        fail("the delegate got \(total) discoveries, expected \(advertisements + 3)")
    }
    central.stopScan()
    simulator.finish()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    printLine("rss_kib \(before.central.rss) \(after.central.rss) \(after.central.rss - before.central.rss)")
    printLine("anon_kib \(before.central.heap) \(after.central.heap) \(after.central.heap - before.central.heap)")
    printLine(
        "simulator_rss_kib \(before.simulator.rss) \(after.simulator.rss) \(after.simulator.rss - before.simulator.rss)"
    )
    printLine(
        "simulator_anon_kib \(before.simulator.heap) \(after.simulator.heap) \(after.simulator.heap - before.simulator.heap)"
    )
    printLine("peak_devices \(peak)")
    printLine("discoveries \(total) markers 3 checksum \(delegate.checksum.load(ordering: .relaxed))")
    printLine("advertisements_per_s \(Int(Double(advertisements - warmUp) / seconds))")
    withExtendedLifetime(central) {}
    exit(0)
}

// MARK: - main

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "serve" where arguments.count <= 3:
    serve(temporaryTimeoutMilliseconds: arguments.count == 3 ? number(arguments[2]) : nil)
case "scan" where arguments.count <= 5:
    let rest = arguments.dropFirst(2).map(number)
    scan(
        advertisements: rest.count > 0 ? rest[0] : 100_000, devices: rest.count > 1 ? rest[1] : 1000,
        warmUp: rest.count > 2 ? rest[2] : 10_000)
case "distinct" where arguments.count <= 6:
    let rest = arguments.dropFirst(2).map(number)
    distinct(
        advertisements: rest.count > 0 ? rest[0] : 1_000_000, warmUp: rest.count > 1 ? rest[1] : 100_000,
        timeoutMilliseconds: rest.count > 2 ? rest[2] : 1000, limit: rest.count > 3 ? rest[3] : 3000)
default:
    fail(
        "usage: ScanMemoryBenchmark scan [ADVERTISEMENTS] [DEVICES] [WARMUP] | distinct [ADVERTISEMENTS] [WARMUP] [TIMEOUT_MS] [LIMIT] | serve [TIMEOUT_MS]"
    )
}
