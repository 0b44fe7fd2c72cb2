// PendingConnectBenchmark — what a connect request that waits costs.
//
//   PendingConnectBenchmark --minutes N [--adapter hci0] [--peripheral-adapter hci1] [--name NAME]
//
// Runs against a real bluetoothd (Scripts/measure-pending-cpu starts it in the emulated
// environment with heart-rate-peripheral advertising NAME on the peripheral adapter). Finds
// the peripheral, powers its adapter off, asks to connect, and while the request is pending
// for N minutes measures this process's CPU time (getrusage) and bluetoothd's (/proc). Prints
// the figures and exits 0 if the request was still pending at the end (it never times out).
import BlueZKit
import Dispatch
import Foundation
import Synchronization

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("PendingConnectBenchmark: \(message)\n".utf8))
    exit(1)
}

var minutes = 10.0
var adapter = "hci0"
var peripheralAdapter = "hci1"
var name = "Pending HRM"
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
    switch argument {
    case "--minutes": minutes = Double(value) ?? minutes
    case "--adapter": adapter = value
    case "--peripheral-adapter": peripheralAdapter = value
    case "--name": name = value
    default: fail("unknown argument \(argument)")
    }
}

/// CPU seconds (user + system) of this process.
func ownCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
}

/// CPU seconds (user + system) of the process named `name`, from /proc/PID/stat.
func cpu(ofProcessNamed name: String) -> Double? {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    for pid in entries where Int(pid) != nil {
        // /proc files report size 0: read to the end instead of trusting the size.
        guard let data = FileHandle(forReadingAtPath: "/proc/\(pid)/stat")?.readDataToEndOfFile(),
            case let stat = String(decoding: data, as: UTF8.self),
            stat.contains("(\(name))"), let close = stat.lastIndex(of: ")")
        else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
        return (user + system) / ticks
    }
    return nil
}

func setPowered(_ adapter: String, _ on: Bool) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
    process.arguments = [
        "set-property", "org.bluez", "/org/bluez/\(adapter)", "org.bluez.Adapter1", "Powered", "b",
        on ? "true" : "false",
    ]
    do { try process.run() } catch { fail("busctl: \(error)") }
    while process.isRunning { usleep(10_000) }
}

final class Finder: CentralManagerDelegate, @unchecked Sendable {
    let found = Mutex<Peripheral?>(nil)
    /// Links made and lost while the request was supposed to wait (btvirt artefacts, if any).
    let links = Mutex<[String]>([])
    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        links.withLock { $0.append("connected") }
    }
    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        links.withLock { $0.append("disconnected") }
        // Keep the request pending, as an app waiting for its door lock would.
        central.connect(peripheral)
    }
    let wanted: String
    init(wanted: String) { self.wanted = wanted }
    func centralManagerDidUpdateState(_ central: CentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: nil) }
    }
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        guard advertisementData.localName == wanted else { return }
        central.stopScan()
        found.withLock { $0 = peripheral }
    }
}

let finder = Finder(wanted: name)
let queue = DispatchQueue(label: "pending-connect")
let central = CentralManager(delegate: finder, queue: queue, options: CentralManagerOptions(adapter: adapter))
let findDeadline = Date().addingTimeInterval(120)
while finder.found.withLock({ $0 }) == nil {
    guard Date() < findDeadline else { fail("\(name) was not found on \(adapter) in 120 s") }
    usleep(50_000)
}
let peripheral = finder.found.withLock { $0 }!
setPowered(peripheralAdapter, false)
// btvirt accepts a link to a controller for a moment while it powers down: let that pass.
Thread.sleep(forTimeInterval: 5)
central.connect(peripheral)
while peripheral.state != .connecting { usleep(10_000) }
print("request pending; measuring for \(minutes) minutes")
let startOwn = ownCPU()
let startDaemon = cpu(ofProcessNamed: "bluetoothd")
let start = Date()
Thread.sleep(forTimeInterval: minutes * 60)
let wall = Date().timeIntervalSince(start)
let own = ownCPU() - startOwn
let daemon = startDaemon.flatMap { before in cpu(ofProcessNamed: "bluetoothd").map { $0 - before } }
let state = peripheral.state
print(
    String(
        format: "pending for %.0f s: BlueZKit central %.3f s CPU (%.3f%% of one core, %.1f ms/min)", wall, own,
        own / wall * 100, own / wall * 60_000))
if let daemon {
    print(String(format: "bluetoothd over the same time: %.3f s CPU (%.3f%%)", daemon, daemon / wall * 100))
}
print(
    "request still pending at the end: \(state == .connecting) (state \(state.rawValue)); links meanwhile: \(finder.links.withLock { $0 })"
)
setPowered(peripheralAdapter, true)
exit(state == .connecting ? 0 : 1)
