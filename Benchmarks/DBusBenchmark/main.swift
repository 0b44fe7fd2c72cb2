// DBusBenchmark — the Swift side of Scripts/benchmark-dbus.
//
//   DBusBenchmark receive ADDRESS N
//       Subscribes to PropertiesChanged (the same match rule as the C receiver),
//       takes each GattCharacteristic1 Value with propertiesChangedValueBytes(of:),
//       hands the [UInt8] to a cheap consumer (a checksum), prints "ready" once the
//       bus has the rule and exits after N values.
//   DBusBenchmark roundtrips ADDRESS N [DESTINATION]
//       N sequential Echo(ay) calls after a warm-up of 200; prints "roundtrip_us X".
//       DESTINATION defaults to the C echo server, org.bluezkit.Benchmark.EchoC.
//   DBusBenchmark serve-echo ADDRESS
//       Owns org.bluezkit.Benchmark.EchoSwift and exports Echo(ay) -> ay and Quit().
//
// The names and the checksum are those of Benchmarks/c/bench-common.h.

import DBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

enum Bench {
    static let characteristicInterface: InterfaceName = "org.bluez.GattCharacteristic1"
    static let echoNameC: BusName = "org.bluezkit.Benchmark.EchoC"
    static let echoNameSwift: BusName = "org.bluezkit.Benchmark.EchoSwift"
    static let echoPath = try! ObjectPath("/org/bluezkit/Benchmark")
    static let echoInterface: InterfaceName = "org.bluezkit.Benchmark"
    static let valueLength = 20
    static let warmUp = 200

    /// The value bytes of notification or call number `index` (as in bench-common.h), filled in
    /// one loop as the C programs fill theirs: `map` over a range cost the client ~330
    /// instructions per call (callgrind), the loop about a fifth of that; the library is what
    /// the comparison with C measures, not how the harness makes its bytes.
    static func value(_ index: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: valueLength) { buffer, count in
            for offset in 0..<valueLength { buffer[offset] = UInt8(truncatingIfNeeded: index &* 7 &+ offset) }
            count = valueLength
        }
    }
}

func fail(_ text: String) -> Never {
    var line = Array("DBusBenchmark: \(text)\n".utf8)
    _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    exit(1)
}

/// One line on standard output, written at once (the script waits for "ready").
func printFlushed(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func count(_ text: String) -> Int {
    guard let n = Int(text), n > 0 else { fail("not a positive count: \(text)") }
    return n
}

// MARK: - receive

/// What the receiver's handler updates. Touched only on the connection's queue
/// (handlers run there, one at a time): the invariant behind `@unchecked Sendable`.
final class Receiver: @unchecked Sendable {
    let target: Int
    let done: AsyncStream<Void>.Continuation
    var values = 0
    var others = 0
    var checksum: UInt64 = 0

    init(target: Int, done: AsyncStream<Void>.Continuation) {
        self.target = target
        self.done = done
    }

    /// The consumer: cheap, and its result is printed, so it cannot be optimised away.
    @inline(never)
    func consume(_ bytes: [UInt8]) {
        var sum = checksum
        for byte in bytes { sum = sum &* 31 &+ UInt64(byte) }
        checksum = sum
        values += 1
        if values == target { done.finish() }
    }
}

func receive(address: String, target: Int) async throws(DBusError) {
    let connection = try await DBusConnection.open(address: address, label: "benchmark.receive")
    let (finished, done) = AsyncStream<Void>.makeStream()
    let receiver = Receiver(target: target, done: done)
    let rule = DBusMatchRule(interface: .properties, member: "PropertiesChanged")
    let subscription = try await connection.subscribe(rule) { message in
        if let bytes = message.propertiesChangedValueBytes(of: Bench.characteristicInterface) {
            receiver.consume(bytes)
        } else {
            receiver.others += 1
        }
    }
    printFlushed("ready")
    for await _ in finished {}
    // The stream finished on the queue right after the last value: read the totals there.
    let (values, others, checksum) = connection.queue.sync { (receiver.values, receiver.others, receiver.checksum) }
    printFlushed("received \(values) values, \(others) other signals, checksum \(checksum)")
    withExtendedLifetime(subscription) {}
    exit(values == target ? 0 : 1)
}

// MARK: - roundtrips

func roundtrips(address: String, count: Int, destination: BusName) async throws(DBusError) {
    let connection = try await DBusConnection.open(address: address, label: "benchmark.roundtrips")
    func roundtrip(_ index: Int) async throws(DBusError) {
        let bytes = Bench.value(index)
        let reply = try await connection.call(
            destination: destination, path: Bench.echoPath, interface: Bench.echoInterface, member: "Echo",
            arguments: [.bytes(bytes)])
        guard reply.count == 1, case .bytes(let echoed) = reply[0], echoed == bytes else {
            fail("the reply does not echo the call: \(reply)")
        }
    }
    for index in 0..<Bench.warmUp { try await roundtrip(index) }
    let clock = ContinuousClock()
    let start = clock.now
    for index in 0..<count { try await roundtrip(index) }
    let elapsed = clock.now - start
    let microseconds =
        Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
    printFlushed("roundtrip_us " + format3(microseconds / Double(count)))
    connection.close()
}

/// `x` with three decimals (no Foundation).
func format3(_ x: Double) -> String {
    let scaled = Int((x * 1000).rounded())
    let fraction = String(scaled % 1000)
    return "\(scaled / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

// MARK: - serve-echo

func serveEcho(address: String) async throws(DBusError) -> Never {
    let connection = try await DBusConnection.open(address: address, label: "benchmark.serve-echo")
    let echo = DBusMethod("Echo", in: "ay", out: "ay") { invocation in
        guard let arguments = try? invocation.arguments() else {
            return invocation.reply(error: DBusError(.invalidArgs, "cannot decode the arguments"))
        }
        invocation.reply(arguments)
    }
    let quit = DBusMethod("Quit") { invocation in
        invocation.reply()
        connection.queue.async { exit(0) }
    }
    try await connection.export([DBusInterface(Bench.echoInterface, methods: [echo, quit])], at: Bench.echoPath)
    guard try await connection.requestName(Bench.echoNameSwift) == .primaryOwner else {
        fail("cannot own \(Bench.echoNameSwift)")
    }
    printFlushed("ready")
    while true {
        try? await Task.sleep(for: .seconds(3600))
    }
}

// MARK: - main

// A synchronous main that parks the main thread on a semaphore while a detached
// task runs the subcommand. An async top-level main would end in dispatchMain(),
// whose signal thread waits in rt_sigsuspend, and Valgrind 3.19 (Debian 12)
// crashes on that system call — the benchmark runs the receiver under callgrind.
func usage() -> Never {
    fail(
        """
        usage: DBusBenchmark receive ADDRESS N
               DBusBenchmark roundtrips ADDRESS N [DESTINATION]
               DBusBenchmark serve-echo ADDRESS
        """)
}

func run(_ arguments: [String]) async {
    guard arguments.count >= 3 else { usage() }
    do throws(DBusError) {
        switch (arguments[1], arguments.count) {
        case ("receive", 4):
            try await receive(address: arguments[2], target: count(arguments[3]))
        case ("roundtrips", 4), ("roundtrips", 5):
            let destination = arguments.count == 5 ? try BusName(arguments[4]) : Bench.echoNameC
            try await roundtrips(address: arguments[2], count: count(arguments[3]), destination: destination)
        case ("serve-echo", 3):
            try await serveEcho(address: arguments[2])
        default:
            usage()
        }
    } catch {
        fail("\(error)")
    }
}

let finished = DispatchSemaphore(value: 0)
let commandLine = CommandLine.arguments
Task.detached {
    await run(commandLine)
    finished.signal()
}
finished.wait()
exit(0)
