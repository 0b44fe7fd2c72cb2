// NotifySocketBenchmark — a CentralManager receiving notifications (Scripts/benchmark, fd_notify).
//
//   NotifySocketBenchmark receive N [socket|signals] [BATCH]
//       Starts `NotifySocketBenchmark serve` as a child process (BlueZKitTesting's simulated
//       bluetoothd on its own private bus, with one simulated heart-rate sensor), so that
//       `valgrind --tool=callgrind --trace-children=no` counts only this process: a
//       CentralManager (usesNotifySockets true for "socket", the default, false for "signals")
//       scans for the sensor, connects, discovers 0x180D and 0x2A37 and subscribes. The child
//       then checks that the subscription took the intended path (NotifyAcquired true for
//       "socket": notifications come through AcquireNotify's socket; false with Notifying true
//       for "signals": PropertiesChanged signals after StartNotify) and sends N notifications in
//       batches of BATCH (default 100): each batch goes out as fast as the simulator takes it,
//       the next one only once the delegate counted every notification of this one (the
//       simulator drops a notification that finds the socket full; a batch stays well below
//       the socket's buffer, and below the 128 StartNotify values of one characteristic that a
//       central's delivery backlog keeps while its delegate queue is behind: under callgrind
//       a batch of 200 lost some and the benchmark stopped). The delegate counts
//       `peripheral(_:didUpdateValueFor:error:)` and reads each value as an application would.
//       The waits are semaphores, not polling, so
//       that the instructions between two runs of different N differ only by the
//       notifications (and their batches). Prints "path socket|signals", "received N checksum C"
//       and "notifications_per_s X" (wall clock, for information).
//   NotifySocketBenchmark serve
//       The child: prints "address ADDRESS", then obeys lines on standard input — "add"
//       (waits until the adapter discovers, adds the sensor), "check socket|signals",
//       "notify K" — answering "ok" to each (or exiting with a message); exits at the end of
//       its input.

import BlueZKit
import BlueZKitTesting
import DBus
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("NotifySocketBenchmark: \(text)\n".utf8))
    exit(1)
}

func printLine(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
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

/// A property of the simulated characteristic, read over the simulator's bus.
func characteristicProperty(_ name: String, of characteristic: SimulatedCharacteristic, bus: String) -> DBusValue? {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var value: DBusValue?
    nonisolated(unsafe) var failure: (any Error)?
    Task.detached {
        do {
            guard let objectPath = characteristic.objectPath else { throw CocoaError(.featureUnsupported) }
            let path = try ObjectPath(objectPath)
            let connection = try await DBusConnection.open(address: bus)
            defer { connection.close() }
            let reply = try await connection.call(
                destination: "org.bluez", path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                arguments: [.string("org.bluez.GattCharacteristic1"), .string(name)])
            value = reply.first?.unwrappingVariants
        } catch {
            failure = error
        }
        done.signal()
    }
    done.wait()
    if let failure { fail("serve: cannot read \(name): \(failure)") }
    return value
}

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
    let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
    let sensor = SimulatedPeripheral(
        address: "C0:FF:EE:00:00:01", addressType: .random, name: "Notify Bench", serviceUUIDs: ["180D"],
        services: [SimulatedService(uuid: "180D", characteristics: [measurement])])
    printLine("address \(bluez.busAddress)")
    var sent = 0
    while let line = readLine(fd: 0) {
        let words = line.split(separator: " ").map(String.init)
        switch (words.first ?? "", words.count) {
        case ("add", 1):
            let deadline = DispatchTime.now() + .seconds(60)
            while !adapter.isDiscovering {
                guard DispatchTime.now() < deadline else { stopAndFail("serve: the adapter never started discovering") }
                usleep(2000)
            }
            do { try bluez.addPeripheral(sensor, to: adapter) } catch { stopAndFail("serve: \(error)") }
        case ("check", 2):
            // The acquisition is answered before NotifyAcquired changes: give it a moment.
            let wanted: DBusValue = .bool(words[1] == "socket")
            let deadline = DispatchTime.now() + .seconds(10)
            while characteristicProperty("NotifyAcquired", of: measurement, bus: bluez.busAddress) != wanted {
                guard DispatchTime.now() < deadline else {
                    stopAndFail("serve: NotifyAcquired is not \(wanted) for the \(words[1]) path")
                }
                usleep(20_000)
            }
            guard measurement.isNotifying else { stopAndFail("serve: the central did not enable notifications") }
        case ("notify", 2):
            guard let count = Int(words[1]), count > 0 else { stopAndFail("serve: bad command '\(line)'") }
            for _ in 0..<count {
                // A heart-rate measurement: flags (sensor contact detected), 8-bit rate.
                let value: [UInt8] = [0x06, UInt8(truncatingIfNeeded: 60 + sent % 120)]
                guard measurement.notify(value) else { stopAndFail("serve: notification \(sent) not delivered") }
                sent += 1
            }
        default:
            stopAndFail("serve: bad command '\(line)'")
        }
        printLine("ok")
    }
    bluez.stop()
    exit(0)
}

// MARK: - receive (the measured process)

final class BenchmarkDelegate: CentralManagerDelegate, PeripheralDelegate, Sendable {
    /// Signalled at each step of the set-up, and when `target` notifications were counted.
    let step = DispatchSemaphore(value: 0)
    let received = Atomic<Int>(0)
    let target = Atomic<Int>(Int.max)
    let checksum = Atomic<Int>(0)
    let poweredOn = Atomic<Bool>(false)
    let failure = Mutex<String?>(nil)
    let found = Mutex<Peripheral?>(nil)

    func failed(_ text: String) {
        failure.withLock { $0 = text }
        step.signal()
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        if central.state == .poweredOn, !poweredOn.exchange(true, ordering: .acquiringAndReleasing) { step.signal() }
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        let first = found.withLock { stored in
            guard stored == nil else { return false }
            stored = peripheral
            return true
        }
        guard first else { return }
        central.stopScan()
        step.signal()
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) { step.signal() }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        failed("cannot connect: \(String(describing: error))")
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        if let error { return failed("service discovery: \(error)") }
        step.signal()
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        if let error { return failed("characteristic discovery: \(error)") }
        step.signal()
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error { return failed("subscription: \(error)") }
        if characteristic.isNotifying { step.signal() }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        // Read the value as an application would (the rate byte of the measurement).
        if let value = characteristic.value, value.count > 1 {
            checksum.add(Int(value[value.startIndex + 1]), ordering: .relaxed)
        }
        if received.add(1, ordering: .acquiringAndReleasing).newValue == target.load(ordering: .acquiring) {
            step.signal()
        }
    }
}

/// Starts `serve` with pipes on its standard input and output: posix_spawn with nothing but
/// those two descriptors, as Foundation's Process fails under valgrind (it closes every
/// descriptor of the child, valgrind's own among them: EBADF).
func spawnServer() -> (pid: pid_t, input: Int32, output: Int32) {
    var toChild: [Int32] = [-1, -1]
    var fromChild: [Int32] = [-1, -1]
    guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { fail("pipe: \(errno)") }
    // None of them stays open in the child but as its standard input and output (dup2).
    for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
    posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
    let executable = CommandLine.arguments[0]
    var argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup("serve"), nil]
    defer { for argument in argv { free(argument) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, executable, &actions, nil, &argv, environ)
    guard status == 0 else { fail("cannot start the simulator process: \(String(cString: strerror(status)))") }
    close(toChild[0])
    close(fromChild[1])
    return (pid, toChild[1], fromChild[0])
}

func receive(count: Int, path: String, batch: Int) {
    guard count > 0, batch > 0, path == "socket" || path == "signals" else {
        fail("usage: NotifySocketBenchmark receive N [socket|signals] [BATCH]")
    }
    // The child: the simulator on its own bus.
    let (child, input, output) = spawnServer()
    func command(_ text: String) {
        var line = Array((text + "\n").utf8)
        guard line.withUnsafeMutableBytes({ write(input, $0.baseAddress, $0.count) }) == line.count else {
            fail("the simulator process is gone")
        }
        guard let answer = readLine(fd: output), answer == "ok" else { fail("the simulator failed at '\(text)'") }
    }
    guard let first = readLine(fd: output), first.hasPrefix("address ") else { fail("the simulator did not start") }
    let address = String(first.dropFirst("address ".count))

    let delegate = BenchmarkDelegate()
    // Set-up steps must not take long; the timeout is generous for valgrind.
    func awaitStep(_ what: String) {
        guard delegate.step.wait(timeout: .now() + .seconds(300)) == .success else { fail("timed out: \(what)") }
        if let failure = delegate.failure.withLock({ $0 }) { fail(failure) }
    }
    let queue = DispatchQueue(label: "benchmark.central")
    let central = CentralManager(
        delegate: delegate, queue: queue,
        options: CentralManagerOptions(busAddress: address, usesNotifySockets: path == "socket"))
    awaitStep("poweredOn")
    central.scanForPeripherals(withServices: [BluetoothUUID(0x180D)])
    command("add")
    awaitStep("the sensor's discovery")
    guard let peripheral = delegate.found.withLock({ $0 }) else { fail("no peripheral") }
    peripheral.delegate = delegate
    central.connect(peripheral)
    awaitStep("the connection")
    peripheral.discoverServices([BluetoothUUID(0x180D)])
    awaitStep("the services")
    guard let service = peripheral.services?.first(where: { $0.uuid == BluetoothUUID(0x180D) }) else {
        fail("no heart-rate service")
    }
    peripheral.discoverCharacteristics([BluetoothUUID(0x2A37)], for: service)
    awaitStep("the characteristics")
    guard let characteristic = service.characteristics?.first(where: { $0.uuid == BluetoothUUID(0x2A37) }) else {
        fail("no heart-rate measurement")
    }
    peripheral.setNotifyValue(true, for: characteristic)
    awaitStep("the subscription")
    command("check \(path)")

    let clock = ContinuousClock()
    let start = clock.now
    var sent = 0
    while sent < count {
        let size = min(batch, count - sent)
        sent += size
        delegate.target.store(sent, ordering: .releasing)
        command("notify \(size)")
        guard delegate.step.wait(timeout: .now() + .seconds(120)) == .success else {
            fail(
                "the delegate counted \(delegate.received.load(ordering: .acquiring)) of \(sent) notifications "
                    + "(a notification lost: the socket full?)")
        }
    }
    let elapsed = clock.now - start
    // Anything beyond the count (a duplicate) would land now.
    usleep(100_000)
    let total = delegate.received.load(ordering: .acquiring)
    guard total == count else { fail("the delegate counted \(total) notifications, expected \(count)") }
    close(input)
    var status: Int32 = 0
    _ = waitpid(child, &status, 0)
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    printLine("path \(path)")
    printLine("received \(total) checksum \(delegate.checksum.load(ordering: .relaxed))")
    printLine("notifications_per_s \(Int(Double(count) / seconds))")
    withExtendedLifetime(central) {}
    exit(0)
}

// MARK: - main

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "serve" where arguments.count == 2:
    serve()
case "receive" where (3...5).contains(arguments.count):
    guard let count = Int(arguments[2]) else { fail("not a count: \(arguments[2])") }
    let batch = arguments.count > 4 ? Int(arguments[4]) ?? 0 : 100
    receive(count: count, path: arguments.count > 3 ? arguments[3] : "socket", batch: batch)
default:
    fail("usage: NotifySocketBenchmark receive N [socket|signals] [BATCH] | serve")
}
