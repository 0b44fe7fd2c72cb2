// PeripheralUpdateBenchmark — a PeripheralManager sending values with updateValue (Scripts/benchmark).
//
//   PeripheralUpdateBenchmark send N [BATCH]
//       Starts `PeripheralUpdateBenchmark serve` as a child process (BlueZKitTesting's simulated
//       bluetoothd on its own private bus), so that `valgrind --tool=callgrind
//       --trace-children=no` counts only this process: a PeripheralManager publishes a
//       heart-rate service (0x180D, measurement 0x2A37 that notifies), the child's simulated
//       central subscribes (StartNotify: each value is a PropertiesChanged signal to
//       bluetoothd), and the manager sends N values of 20 bytes with
//       `updateValue(_:for:onSubscribedCentrals:)` in batches of BATCH (default 200): a batch as
//       fast as updateValue takes them (waiting for `peripheralManagerIsReady` when it says no),
//       the next once the child's central received every value of this one. Prints
//       "sent N refused R" (R: updates that said "not now" and were sent again).
//   PeripheralUpdateBenchmark serve
//       The child: prints "address ADDRESS", then obeys lines on standard input — "subscribe"
//       (adds a central, waits for the application, subscribes to 0x2A37), "count K" (waits
//       until the central received K values in all) — answering "ok" to each; exits at the end
//       of its input.

import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("PeripheralUpdateBenchmark: \(text)\n".utf8))
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

/// Runs `body` in a task and waits for it (the child's simple command loop is synchronous).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task.detached {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    switch result.withLock({ $0 })! {
    case .success(let value): return value
    case .failure(let error): fail("serve: \(error)")
    }
}

// MARK: - serve (the child)

/// How many values the child's central received.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

func serve() {
    let bluez = blocking { try await SimulatedBlueZ.start() }
    printLine("address \(bluez.busAddress)")
    let received = Counter()
    // The central must outlive its case: its subscription ends with it.
    var centrals: [SimulatedCentral] = []
    while let line = readLine(fd: 0) {
        let words = line.split(separator: " ").map(String.init)
        switch (words.first ?? "", words.count) {
        case ("subscribe", 1):
            let deadline = DispatchTime.now() + .seconds(300)
            while bluez.adapters.first?.registeredApplications.isEmpty != false {
                guard DispatchTime.now() < deadline else { fail("serve: the service was never published") }
                usleep(2000)
            }
            let central = blocking { try bluez.addCentral(address: "11:22:33:44:55:66") }
            centrals.append(central)
            // The manager learns of the link from bluetoothd's signals, on another connection than
            // the central's StartNotify: let them arrive first, so that it can tell who subscribed.
            usleep(300_000)
            let stream = blocking { try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37") }
            Task.detached {
                for await _ in stream { received.value.add(1, ordering: .relaxed) }
            }
        case ("count", 2):
            guard let count = Int(words[1]) else { fail("serve: bad command '\(line)'") }
            let deadline = DispatchTime.now() + .seconds(300)
            while received.value.load(ordering: .relaxed) < count {
                guard DispatchTime.now() < deadline else {
                    fail("serve: the central received \(received.value.load(ordering: .relaxed)) of \(count) values")
                }
                usleep(500)
            }
        default:
            fail("serve: bad command '\(line)'")
        }
        printLine("ok")
    }
    withExtendedLifetime(centrals) {}
    bluez.stop()
    exit(0)
}

// MARK: - send (the measured process)

final class BenchmarkDelegate: PeripheralManagerDelegate, Sendable {
    let poweredOn = DispatchSemaphore(value: 0)
    let added = DispatchSemaphore(value: 0)
    let subscribed = DispatchSemaphore(value: 0)
    let ready = DispatchSemaphore(value: 0)
    let failure = Mutex<String?>(nil)

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        if peripheral.state == .poweredOn { poweredOn.signal() }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        if let error { failure.withLock { $0 = "didAdd: \(error)" } }
        added.signal()
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        subscribed.signal()
    }
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) { ready.signal() }
}

/// Starts `serve` with pipes on its standard input and output (posix_spawn: Foundation's
/// Process closes every descriptor of the child, valgrind's among them).
func spawnServer() -> (pid: pid_t, input: Int32, output: Int32) {
    var toChild: [Int32] = [-1, -1]
    var fromChild: [Int32] = [-1, -1]
    guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { fail("pipe: \(errno)") }
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

func send(count: Int, batch: Int) {
    guard count > 0, batch > 0 else { fail("usage: PeripheralUpdateBenchmark send N [BATCH]") }
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
    func waitFor(_ semaphore: DispatchSemaphore, _ what: String) {
        guard semaphore.wait(timeout: .now() + .seconds(300)) == .success else { fail("timed out: \(what)") }
        if let failure = delegate.failure.withLock({ $0 }) { fail(failure) }
    }
    let manager = PeripheralManager(
        delegate: delegate, queue: DispatchQueue(label: "benchmark.peripheral"),
        options: PeripheralManagerOptions(busAddress: address))
    waitFor(delegate.poweredOn, "poweredOn")
    let measurement = MutableCharacteristic(
        type: BluetoothUUID(0x2A37), properties: [.notify], value: nil, permissions: [.readable])
    let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
    service.characteristics = [measurement]
    manager.add(service)
    waitFor(delegate.added, "didAdd")
    command("subscribe")
    waitFor(delegate.subscribed, "didSubscribe")

    var sent = 0
    var refused = 0
    var value = Data(count: 20)
    while sent < count {
        let end = min(sent + batch, count)
        while sent < end {
            value[0] = UInt8(truncatingIfNeeded: sent)
            if manager.updateValue(value, for: measurement, onSubscribedCentrals: nil) {
                sent += 1
            } else {
                refused += 1
                waitFor(delegate.ready, "peripheralManagerIsReady")
            }
        }
        command("count \(sent)")
    }
    close(input)
    var status: Int32 = 0
    _ = waitpid(child, &status, 0)
    printLine("sent \(sent) refused \(refused)")
    withExtendedLifetime(manager) {}
    exit(0)
}

// MARK: - main

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "serve" where arguments.count == 2:
    serve()
case "send" where (3...4).contains(arguments.count):
    guard let count = Int(arguments[2]) else { fail("not a count: \(arguments[2])") }
    send(count: count, batch: arguments.count > 3 ? Int(arguments[3]) ?? 0 : 200)
default:
    fail("usage: PeripheralUpdateBenchmark send N [BATCH] | serve")
}
