// WakeupFloor — BlueZKit's per-notification paths alone, for the wake-up floor
// (Scripts/benchmark-wakeup-floor, driven by Scripts/guest/wakeup-floor.py), beside the C floor
// (Benchmarks/c/wakeup-reader.c, wakeup-sender.c) and Python (Benchmarks/python/wakeup_*.py).
//
//   WakeupFloor read FD
//       The central's receive path: BlueZ's BlueZNotifySocket (the AcquireNotify reader every
//       CentralManager uses) on the inherited SOCK_SEQPACKET socket FD, handing values to a
//       serial queue (the manager's); `onValue` makes the `Data` CentralManager delivers and
//       decodes the heart rate from it, as the example central's delegate does. Prints "ready",
//       then "received COUNT sum SUM" when the writer (Benchmarks/c/wakeup-writer.c) closed its end.
//   WakeupFloor send dispatch|thread INTERVAL_MS COUNT [DESTINATION]
//       The peripheral's send path: a DBusConnection to the system bus working on its own
//       serial queue (PeripheralManager's bus queue); every INTERVAL_MS a tick hops onto that
//       queue with `sync` (as updateValue does from the delegate's queue), emits
//       PropertiesChanged("org.bluez.GattCharacteristic1", {"Value": <ay>}, []) through
//       `emitBytesPropertyChanged(... toOwnerOf: DESTINATION)` (updateValue's emission,
//       BlueZGattApplication.notify; default destination org.bluez; an empty DESTINATION
//       broadcasts the same message through DBusConnection.send), then writes one line
//       {"bpm": N, "event": "notified"} to standard output with write(2). COUNT ticks, then exit.
//         dispatch  the tick is a DispatchSourceTimer on a serial queue, as heart-rate-peripheral
//                   measures (libdispatch's timer: its manager thread wakes a worker for the queue)
//         thread    the tick is a thread of its own sleeping in clock_nanosleep to an absolute
//                   schedule, as the C floor does: the difference is what the timer costs a tick.
//   WakeupFloor signal direct|hop|thread COUNT
//       The central's StartNotify receive path in BlueZKit's D-Bus layer: a DBusConnection to the
//       system bus on its own serial queue (the bus queue) subscribes to PropertiesChanged; each
//       signal is read by the connection's reading thread, which runs the handler inside
//       `queue.sync`, and its Value bytes taken as CentralEngine takes them
//       (`propertiesChangedValueBytes(of:)`). Then one line {"bpm": N, "event": "heartRate"}
//       with write(2), as heart-rate-central prints a reading. Prints "ready" once subscribed,
//       exits after COUNT values.
//         direct  the line is written by the handler, on the reading thread (one wake-up)
//         hop     the handler hands a `Data` of the bytes to another serial queue with `async`,
//                 where the rate is decoded and the line written, as CentralManager hands a value
//                 to the delegate queue (the second wake-up, measured by the difference)
//         thread  the handler appends the `Data` to an inbox and signals a condition; a thread of
//                 our own (one per manager, always the same) takes it and runs the line inside
//                 `delegateQueue.sync`: a design where one warm thread, not libdispatch's
//                 rotating workers, makes the second wake-up

import BlueZ
import DBus
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("WakeupFloor: \(text)\n".utf8))
    exit(2)
}

/// One line to standard output in one write(2).
func writeLine(_ text: String) {
    var line = text
    line.append("\n")
    line.withUTF8 { bytes in _ = write(1, bytes.baseAddress, bytes.count) }
}

func number(_ text: String?, minimum: Int) -> Int {
    guard let text, let value = Int(text), value >= minimum else { fail("not a number >= \(minimum): \(text ?? "")") }
    return value
}

/// The heart rate in a measurement: 8 bits, or 16 (little endian) when flags bit 0 is set.
func heartRate(_ value: Data) -> Int {
    guard value.count >= 2 else { return 0 }
    let start = value.startIndex
    if value[start] & 0x01 != 0, value.count >= 3 {
        return Int(value[start + 1]) | Int(value[start + 2]) << 8
    }
    return Int(value[start + 1])
}

// MARK: - read

/// The delegate's totals. `@unchecked Sendable`: touched on the delegate queue only.
final class Totals: @unchecked Sendable {
    var received = 0
    var sum = 0
}

func runReader(descriptor: Int32) -> Never {
    let queue = DispatchQueue(label: "wakeup-floor.central")
    let totals = Totals()
    let socket = BlueZNotifySocket(
        descriptor: UnixFileDescriptor(owning: descriptor), mtu: 23, queue: queue,
        onValue: { bytes in
            let value = Data(bytes)
            totals.received += 1
            totals.sum += heartRate(value)
        },
        onClose: {
            writeLine("received \(totals.received) sum \(totals.sum)")
            exit(0)
        })
    writeLine("ready")
    withExtendedLifetime(socket) { () -> Void in dispatchMain() }
    fail("dispatchMain returned")
}

// MARK: - signal

/// The values seen. `@unchecked Sendable`: touched on one queue only (the bus queue, or the
/// delegate queue when hopping).
final class SignalCount: @unchecked Sendable {
    var value = 0
}

func runSignalReceiver(mode: String, count: Int) -> Never {
    guard ["direct", "hop", "thread"].contains(mode) else { fail("signal takes direct, hop or thread, not \(mode)") }
    let busQueue = DispatchQueue(label: "wakeup-floor.bus")
    let delegateQueue = DispatchQueue(label: "wakeup-floor.central")
    let connection = connect(busQueue: busQueue)
    let seen = SignalCount()
    let interface = Sender.interface
    let hops = mode == "hop"
    let inbox = mode == "thread" ? DeliveryInbox(queue: delegateQueue, deliver: reading) : nil
    @Sendable func reading(_ value: Data) {
        writeLine("{\"bpm\": \(heartRate(value)), \"event\": \"heartRate\"}")
        seen.value += 1
        if seen.value == count { exit(0) }
    }
    let subscribed = DispatchSemaphore(value: 0)
    let failure = SubscribeResult()
    let subscription = SubscriptionBox()
    Task.detached {
        do throws(DBusError) {
            subscription.value = try await connection.subscribe(
                DBusMatchRule(interface: .properties, member: "PropertiesChanged")
            ) { message in
                guard let bytes = message.propertiesChangedValueBytes(of: interface) else { return }
                if let inbox {
                    inbox.post(Data(bytes))
                } else if hops {
                    let value = Data(bytes)
                    delegateQueue.async { reading(value) }
                } else {
                    reading(Data(bytes))
                }
            }
        } catch {
            failure.result = .failure(error)
        }
        subscribed.signal()
    }
    subscribed.wait()
    if case .failure(let error) = failure.result { fail("cannot subscribe: \(error)") }
    writeLine("ready")
    withExtendedLifetime((connection, subscription)) { () -> Void in dispatchMain() }
    fail("dispatchMain returned")
}

/// Values handed from the reading thread to one delivery thread of its own, which runs each
/// inside `queue.sync` (the `thread` variant). `@unchecked Sendable`: `values` is guarded by
/// `condition`.
final class DeliveryInbox: @unchecked Sendable {
    private let condition = NSCondition()
    private var values: [Data] = []

    init(queue: DispatchQueue, deliver: @escaping @Sendable (Data) -> Void) {
        let thread = Thread { [self] in
            var taken: [Data] = []
            while true {
                condition.lock()
                while values.isEmpty { condition.wait() }
                swap(&taken, &values)
                condition.unlock()
                for value in taken { queue.sync { deliver(value) } }
                taken.removeAll(keepingCapacity: true)
            }
        }
        thread.name = "wakeup-floor.delivery"
        thread.start()
    }

    func post(_ value: Data) {
        condition.lock()
        values.append(value)
        condition.signal()
        condition.unlock()
    }
}

/// The subscription, kept for the process's life. `@unchecked Sendable`: set once before `ready`.
final class SubscriptionBox: @unchecked Sendable {
    var value: DBusSubscription?
}

/// Whether subscribing worked, handed from the task that subscribes to the waiting main thread.
/// `@unchecked Sendable`: set before the semaphore's signal, read after its wait.
final class SubscribeResult: @unchecked Sendable {
    var result: Result<Void, DBusError> = .success(())
}

// MARK: - send

/// What a tick does: on the bus queue, the value's signal; then the line.
struct Sender: Sendable {
    let connection: DBusConnection
    let busQueue: DispatchQueue
    /// Where the signals go; nil: a broadcast.
    let destination: BusName?
    static let interface: InterfaceName = "org.bluez.GattCharacteristic1"
    static let path: ObjectPath = {
        do throws(DBusError) {
            return try ObjectPath("/org/bluez/hci0/dev_00_11_22_33_44_55/service0010/char0011")
        } catch {
            fail("not an object path: \(error)")
        }
    }()

    func tick(_ index: Int) {
        let rate = 60 + index % 120
        busQueue.sync {
            let value: [UInt8] = [0x00, UInt8(rate)]
            if let destination {
                connection.emitBytesPropertyChanged(
                    path: Self.path, interface: Self.interface, property: "Value", value: value,
                    toOwnerOf: destination)
            } else {
                // A broadcast: the same message and send as emitBytesPropertyChanged's, no destination.
                do throws(DBusError) {
                    connection.send(
                        try DBusMessage.bytesPropertyChanged(
                            path: Self.path, interface: Self.interface, property: "Value", value: value,
                            destination: nil))
                } catch {
                    fail("cannot build the signal: \(error)")
                }
            }
        }
        writeLine("{\"bpm\": \(rate), \"event\": \"notified\"}")
    }
}

/// The tick count of the dispatch timer. `@unchecked Sendable`: touched on the timer's queue only.
final class TickCount: @unchecked Sendable {
    var value = 0
}

/// The opened connection, handed from the task that opens it to the waiting main thread.
final class Opened: @unchecked Sendable {
    var result: Result<DBusConnection, DBusError>?
}

func connect(busQueue: DispatchQueue) -> DBusConnection {
    let opened = Opened()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do throws(DBusError) {
            opened.result = .success(
                try await DBusConnection.open(address: DBusConnection.systemBusAddress, queue: busQueue))
        } catch {
            opened.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    switch opened.result {
    case .success(let connection): return connection
    case .failure(let error): fail("cannot connect to the system bus: \(error)")
    case nil: fail("no connection")
    }
}

func runSender(mode: String, intervalMs: Int, count: Int, destination: BusName?) -> Never {
    let busQueue = DispatchQueue(label: "wakeup-floor.bus")
    let sender = Sender(connection: connect(busQueue: busQueue), busQueue: busQueue, destination: destination)
    let interval = intervalMs * 1_000_000
    switch mode {
    case "dispatch":
        let queue = DispatchQueue(label: "wakeup-floor.peripheral")
        let ticks = TickCount()
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(interval), repeating: .nanoseconds(interval))
        timer.setEventHandler {
            sender.tick(ticks.value)
            ticks.value += 1
            if ticks.value == count { exit(0) }
        }
        timer.resume()
        withExtendedLifetime(timer) { () -> Void in dispatchMain() }
    case "thread":
        Thread.detachNewThread {
            var next = timespec()
            clock_gettime(CLOCK_MONOTONIC, &next)
            for index in 0..<count {
                next.tv_nsec += interval
                while next.tv_nsec >= 1_000_000_000 {
                    next.tv_nsec -= 1_000_000_000
                    next.tv_sec += 1
                }
                while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nil) == EINTR {}
                sender.tick(index)
            }
            exit(0)
        }
        dispatchMain()
    default:
        fail("send takes dispatch or thread, not \(mode)")
    }
    fail("dispatchMain returned")
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "read" where arguments.count == 3:
    runReader(descriptor: Int32(number(arguments[2], minimum: 0)))
case "signal" where arguments.count == 4:
    runSignalReceiver(mode: arguments[2], count: number(arguments[3], minimum: 1))
case "send" where arguments.count == 5 || arguments.count == 6:
    let name = arguments.count == 6 ? arguments[5] : "org.bluez"
    let destination: BusName?
    do throws(DBusError) {
        destination = name.isEmpty ? nil : try BusName(name)
    } catch {
        fail("not a bus name: \(name)")
    }
    runSender(
        mode: arguments[2], intervalMs: number(arguments[3], minimum: 1), count: number(arguments[4], minimum: 1),
        destination: destination)
default:
    fail(
        "usage: WakeupFloor read FD | send dispatch|thread INTERVAL_MS COUNT [DESTINATION] | signal direct|hop|thread COUNT"
    )
}
