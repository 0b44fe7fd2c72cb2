// GatewayBenchmark — one central reading many heart-rate sensors at once (a gateway).
//
//   GatewayBenchmark [--adapter hci0] [--prefix NAME] [--links K] [--count N] [--warmup W]
//                    [--extra E] [--timeout SECONDS] [--print-readings] [--notify-sockets]
//
// Scans on the adapter for the Heart Rate service (0x180D) until it has seen the K peripherals
// named PREFIX1 … PREFIXK (default prefix "BlueZKit GW ", K = 6), then connects to them one
// after the other in that order (the next connect once the previous one reported didConnect),
// discovers the Heart Rate service and its measurement (0x2A37) on each and subscribes (through
// StartNotify's PropertiesChanged signals, the default, or with --notify-sockets through
// AcquireNotify's socket: CentralManagerOptions.usesNotifySockets, the setting for a gateway
// whose sensors and bluetoothd are known). Every
// notification is decoded as the heart-rate example does (flags, 8- or 16-bit rate, energy
// expended, RR intervals) and counted, per link and in all. Only `import BlueZKit`, Core
// Bluetooth style delegates on one queue.
//
// The connections are made in name order because of the emulated environment: btvirt gives a
// link's two ends the same connection handle only when both controllers have the same lowest
// free handle, and Scripts/guest/gateway-benchmark.py prepares the controllers for exactly
// this order (see there). A gateway on real controllers may connect in any order.
//
// Output, one JSON object per line: "discovered", "connected", "subscribed" per peripheral,
// then, once all K are subscribed and W more readings (default 50) arrived, a "window" line
// with "mark": "start", and N readings later (default 1000, all links together) one with
// "mark": "end" — whoever watches from outside samples /proc/PID/stat at those two lines. Both
// carry this process's own CPU seconds (getrusage) as a cross-check. After E more readings
// (default 50) a "summary" (readings per link in the window, CPU ms per notification) and the
// program disconnects and exits 0. Exits 1 when a connection fails or drops, or nothing is
// done after SECONDS (default 300). --print-readings adds one line per reading (off: the
// benchmark measures the library, not the printing).

import BlueZKit
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

let heartRateService = BluetoothUUID(0x180D)
let heartRateMeasurement = BluetoothUUID(0x2A37)

struct Configuration {
    var adapter = "hci0"
    var prefix = "BlueZKit GW "
    var links = 6
    var count = 1000
    var warmup = 50
    var extra = 50
    var timeout = 300
    var printReadings = false
    var notifySockets = false
}

func usageExit(_ text: String) -> Never {
    FileHandle.standardError.write(
        Data(
            ("GatewayBenchmark: \(text)\nusage: GatewayBenchmark [--adapter hciN] [--prefix NAME] [--links K] "
                + "[--count N] [--warmup W] [--extra E] [--timeout SECONDS] [--print-readings] "
                + "[--notify-sockets]\n").utf8))
    exit(2)
}

func parse(_ arguments: [String]) -> Configuration {
    var configuration = Configuration()
    var rest = arguments[...]
    func number(_ flag: String, minimum: Int) -> Int {
        guard let text = rest.popFirst(), let value = Int(text), value >= minimum else {
            usageExit("\(flag) needs a number of at least \(minimum)")
        }
        return value
    }
    func text(_ flag: String) -> String {
        guard let text = rest.popFirst() else { usageExit("\(flag) needs a value") }
        return text
    }
    while let flag = rest.popFirst() {
        switch flag {
        case "--adapter": configuration.adapter = text(flag)
        case "--prefix": configuration.prefix = text(flag)
        case "--links": configuration.links = number(flag, minimum: 1)
        case "--count": configuration.count = number(flag, minimum: 2)
        case "--warmup": configuration.warmup = number(flag, minimum: 0)
        case "--extra": configuration.extra = number(flag, minimum: 0)
        case "--timeout": configuration.timeout = number(flag, minimum: 1)
        case "--print-readings": configuration.printReadings = true
        case "--notify-sockets": configuration.notifySockets = true
        default: usageExit("unknown argument \(flag)")
        }
    }
    return configuration
}

/// CPU seconds (user + system, every thread) of this process.
func ownCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// One line of JSON on standard output, written at once (the watcher stamps it on arrival).
func emit(_ event: String, _ fields: [(String, String)] = []) {
    var line = "{\"event\": \"\(event)\""
    for (key, value) in fields { line += ", \"\(key)\": \(value)" }
    line += "}\n"
    line.utf8CString.withUnsafeBufferPointer { buffer in
        _ = write(1, buffer.baseAddress, buffer.count - 1)
    }
}

func quoted(_ text: String) -> String {
    "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
}

/// A Heart Rate Measurement's fields, as HeartRateMeasurement(decoding:) reads them.
struct Reading {
    var beatsPerMinute = 0
    var contact = 0
    var energyExpended: Int?
    var rrIntervals: [Int] = []

    init?(_ data: Data) {
        guard let flags = data.first else { return nil }
        var index = data.startIndex + 1
        func take16() -> Int? {
            guard index + 2 <= data.endIndex else { return nil }
            defer { index += 2 }
            return Int(data[index]) | Int(data[index + 1]) << 8
        }
        if flags & 0x01 != 0 {
            guard let value = take16() else { return nil }
            beatsPerMinute = value
        } else {
            guard index < data.endIndex else { return nil }
            beatsPerMinute = Int(data[index])
            index += 1
        }
        contact = Int(flags >> 1) & 0x03
        if flags & 0x08 != 0 {
            guard let value = take16() else { return nil }
            energyExpended = value
        }
        if flags & 0x10 != 0 {
            guard (data.endIndex - index) % 2 == 0 else { return nil }
            while index < data.endIndex, let value = take16() { rrIntervals.append(value) }
        }
    }
}

/// Everything runs on `queue` (the manager's and the peripherals' delegate calls), so the
/// mutable state needs no lock — the invariant behind `@unchecked Sendable`.
final class Gateway: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "gateway")
    let configuration: Configuration
    var manager: CentralManager!
    /// The names wanted, in connection order.
    let names: [String]
    var found: [String: Peripheral] = [:]
    var nameOf: [UUID: String] = [:]
    var connectedCount = 0
    var subscribed = Set<UUID>()
    var perLink: [UUID: Int] = [:]
    var perLinkAtStart: [UUID: Int] = [:]
    var perLinkAtEnd: [UUID: Int] = [:]
    /// Readings since every link was subscribed.
    var readings = 0
    var start: (time: Double, cpu: Double)?
    var end: (time: Double, cpu: Double)?
    var finished = false
    /// Keeps the decoded values observable, so that the decoding is not optimised away.
    var checksum = 0

    init(configuration: Configuration) {
        self.configuration = configuration
        names = (1...configuration.links).map { "\(configuration.prefix)\($0)" }
    }

    func run() {
        queue.async {
            self.manager = CentralManager(
                delegate: self, queue: self.queue,
                options: CentralManagerOptions(
                    adapter: self.configuration.adapter, usesNotifySockets: self.configuration.notifySockets))
        }
        queue.asyncAfter(deadline: .now() + .seconds(configuration.timeout)) {
            self.fail(
                "not done after \(self.configuration.timeout) s: \(self.found.count) found, \(self.connectedCount) "
                    + "connected, \(self.subscribed.count) subscribed, \(self.readings) readings")
        }
    }

    func fail(_ message: String) -> Never {
        emit("error", [("message", quoted(message))])
        exit(1)
    }

    // MARK: CentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CentralManager) {
        guard central.state == .poweredOn else { return }
        central.scanForPeripherals(withServices: [heartRateService], options: nil)
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        guard let name = advertisementData.localName ?? peripheral.name, names.contains(name), found[name] == nil
        else { return }
        found[name] = peripheral
        nameOf[peripheral.identifier] = name
        peripheral.delegate = self
        emit("discovered", [("name", quoted(name)), ("id", quoted(peripheral.identifier.uuidString))])
        guard found.count == names.count else { return }
        central.stopScan()
        connectNext()
    }

    private func connectNext() {
        guard connectedCount < names.count, let peripheral = found[names[connectedCount]] else { return }
        manager.connect(peripheral)
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        connectedCount += 1
        emit("connected", [("name", quoted(nameOf[peripheral.identifier] ?? "")), ("links", "\(connectedCount)")])
        peripheral.discoverServices([heartRateService])
        connectNext()
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        fail("cannot connect to \(nameOf[peripheral.identifier] ?? "?"): \(error.map { "\($0)" } ?? "unknown error")")
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        guard !finished else { return }
        fail(
            "\(nameOf[peripheral.identifier] ?? "?") disconnected after \(readings) readings: \(error.map { "\($0)" } ?? "")"
        )
    }

    // MARK: PeripheralDelegate

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        if let error { fail("service discovery failed: \(error)") }
        guard let service = peripheral.services?.first(where: { $0.uuid == heartRateService }) else {
            fail("no Heart Rate service on \(nameOf[peripheral.identifier] ?? "?")")
        }
        peripheral.discoverCharacteristics([heartRateMeasurement], for: service)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        if let error { fail("characteristic discovery failed: \(error)") }
        guard let measurement = service.characteristics?.first(where: { $0.uuid == heartRateMeasurement }) else {
            fail("no Heart Rate Measurement on \(nameOf[peripheral.identifier] ?? "?")")
        }
        peripheral.setNotifyValue(true, for: measurement)
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error { fail("subscribing failed: \(error)") }
        guard characteristic.isNotifying, subscribed.insert(peripheral.identifier).inserted else { return }
        emit(
            "subscribed", [("name", quoted(nameOf[peripheral.identifier] ?? "")), ("links", "\(subscribed.count)")])
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        guard error == nil, characteristic.uuid == heartRateMeasurement, let value = characteristic.value else {
            return
        }
        guard let reading = Reading(value) else {
            return emit("error", [("message", quoted("unreadable measurement"))])
        }
        checksum &+= reading.beatsPerMinute &+ reading.contact &+ (reading.energyExpended ?? 0)
        for interval in reading.rrIntervals { checksum &+= interval }
        perLink[peripheral.identifier, default: 0] += 1
        if configuration.printReadings {
            emit(
                "heartRate",
                [("name", quoted(nameOf[peripheral.identifier] ?? "")), ("bpm", "\(reading.beatsPerMinute)")])
        }
        guard subscribed.count == names.count, !finished else { return }
        readings += 1
        if readings == configuration.warmup + 1 {
            start = (monotonicSeconds(), ownCPU())
            perLinkAtStart = perLink
            emit("window", [("mark", "\"start\""), ("readings", "\(readings)")])
        } else if readings == configuration.warmup + configuration.count {
            end = (monotonicSeconds(), ownCPU())
            perLinkAtEnd = perLink
            emit("window", [("mark", "\"end\""), ("readings", "\(readings)")])
        }
        if readings >= configuration.warmup + configuration.count + configuration.extra { finish() }
    }

    private func finish() {
        finished = true
        guard let start, let end else { fail("no window") }
        let counts = names.compactMap { name in
            found[name].map { (perLinkAtEnd[$0.identifier] ?? 0) - (perLinkAtStart[$0.identifier] ?? 0) }
        }
        let notifications = Double(configuration.count - 1)
        emit(
            "summary",
            [
                ("links", "\(names.count)"), ("count", "\(configuration.count)"),
                ("per_link", "[\(counts.map(String.init).joined(separator: ", "))]"),
                ("elapsed_s", "\(end.time - start.time)"), ("cpu_s", "\(end.cpu - start.cpu)"),
                ("cpu_ms_per_notification", "\((end.cpu - start.cpu) * 1000 / notifications)"),
                ("notifications_per_s", "\(notifications / (end.time - start.time))"), ("checksum", "\(checksum)"),
            ])
        for peripheral in found.values { manager.cancelPeripheralConnection(peripheral) }
        // Give the disconnects a moment to reach bluetoothd before the process goes.
        queue.asyncAfter(deadline: .now() + .milliseconds(500)) { exit(0) }
    }
}

let gateway = Gateway(configuration: parse(Array(CommandLine.arguments.dropFirst())))
gateway.run()
dispatchMain()
