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
//   ScanMemoryBenchmark serve
//       The child: prints "address ADDRESS", then obeys lines on standard input —
//       "add N" (waits until the adapter discovers, adds N peripherals), "advertise K"
//       — answering "ok" to each; exits at the end of its input.

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

func serve() {
    let started = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var simulator: SimulatedBlueZ?
    Task.detached {
        do { simulator = try await SimulatedBlueZ.start() } catch { fail("cannot start the simulator: \(error)") }
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
    while let line = readLine(fd: 0) {
        let words = line.split(separator: " ")
        guard words.count == 2, let n = Int(words[1]) else { stopAndFail("serve: bad command '\(line)'") }
        switch words[0] {
        case "add":
            let deadline = DispatchTime.now() + .seconds(30)
            while !adapter.isDiscovering {
                guard DispatchTime.now() < deadline else { stopAndFail("serve: the adapter never started discovering") }
                usleep(2000)
            }
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

func scan(advertisements: Int, devices: Int, warmUp: Int) {
    guard devices > 0, advertisements % devices == 0, warmUp % devices == 0, warmUp < advertisements else {
        fail("ADVERTISEMENTS and WARMUP must be multiples of DEVICES, WARMUP < ADVERTISEMENTS")
    }
    // The child: the simulator on its own bus.
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["serve"]
    let toChild = Pipe()
    let fromChild = Pipe()
    child.standardInput = toChild
    child.standardOutput = fromChild
    do { try child.run() } catch { fail("cannot start the simulator process: \(error)") }
    let input = toChild.fileHandleForWriting.fileDescriptor
    let output = fromChild.fileHandleForReading.fileDescriptor
    func command(_ text: String) {
        var line = Array((text + "\n").utf8)
        guard line.withUnsafeMutableBytes({ write(input, $0.baseAddress, $0.count) }) == line.count else {
            fail("the simulator process is gone")
        }
    }
    func awaitOK(_ what: String) {
        guard let line = readLine(fd: output), line == "ok" else { fail("the simulator failed during \(what)") }
    }
    guard let first = readLine(fd: output), first.hasPrefix("address ") else { fail("the simulator did not start") }
    let address = String(first.dropFirst("address ".count))

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
    try? toChild.fileHandleForWriting.close()
    child.waitUntilExit()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    printLine("rss_kib \(before.rss) \(after.rss) \(after.rss - before.rss)")
    printLine("anon_kib \(before.heap) \(after.heap) \(after.heap - before.heap)")
    printLine("discoveries \(total) checksum \(delegate.checksum.load(ordering: .relaxed))")
    printLine("advertisements_per_s \(Int(Double(advertisements - warmUp) / seconds))")
    withExtendedLifetime(central) {}
    exit(0)
}

// MARK: - main

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "serve" where arguments.count == 2:
    serve()
case "scan" where arguments.count <= 5:
    let rest = arguments.dropFirst(2).map(number)
    scan(
        advertisements: rest.count > 0 ? rest[0] : 100_000, devices: rest.count > 1 ? rest[1] : 1000,
        warmUp: rest.count > 2 ? rest[2] : 10_000)
default:
    fail("usage: ScanMemoryBenchmark scan [ADVERTISEMENTS] [DEVICES] [WARMUP] | serve")
}
