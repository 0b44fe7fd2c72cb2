// NotifyPathProfile — a simulated heart-rate sensor for profiling a central's notification path
// on this machine (Scripts/profile-notify-path), with no guest.
//
//   NotifyPathProfile [--interval-ms I] [--timeout S] -- RECEIVER [ARGUMENT...]
//
// Starts BlueZKitTesting's simulated bluetoothd on a private bus with one peripheral named
// "BlueZKit Bench" advertising the Heart Rate service (0x180D: Heart Rate Measurement 0x2A37,
// notify; Body Sensor Location 0x2A38, read), then runs RECEIVER with DBUS_SYSTEM_BUS_ADDRESS
// set to that bus: heart-rate-central --json --name "BlueZKit Bench" --count N, or the C floor
// Benchmarks/c/notify-central.c with the same arguments (each maybe under valgrind). Once the
// receiver subscribed, the sensor notifies a measurement every I ms (default 10: each value its
// own wake-up of the receiver) until the receiver exits; the receiver's standard output and
// error are its own. Prints one JSON line on standard error, {"notified": K, "status": S,
// "cpu_us": C, "voluntary_switches": V, "involuntary_switches": I} (the receiver's CPU time and
// context switches, getrusage(RUSAGE_CHILDREN)), and exits with the receiver's status (1
// after S seconds, default 600, or when the set-up fails).
//
// The simulator runs in this process, not the receiver's, so a profile of the receiver holds
// what the receiver alone does for a value (bluetoothd's part is the simulator's, and differs).

import BlueZKitTesting
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("NotifyPathProfile: \(text)\n".utf8))
    exit(1)
}

let usage = "usage: NotifyPathProfile [--interval-ms I] [--timeout S] -- RECEIVER [ARGUMENT...]"
let commandLine = Array(CommandLine.arguments.dropFirst())
guard let separator = commandLine.firstIndex(of: "--"), separator + 1 < commandLine.count else { fail(usage) }
let receiver = Array(commandLine[(separator + 1)...])

func option(_ flag: String, default value: Int) -> Int {
    let arguments = commandLine[..<separator]
    guard let index = arguments.firstIndex(of: flag) else { return value }
    guard index + 1 < arguments.count, let number = Int(arguments[index + 1]), number > 0 else {
        fail("\(flag) takes a positive whole number\n\(usage)")
    }
    return number
}
let intervalMilliseconds = option("--interval-ms", default: 10)
let timeoutSeconds = option("--timeout", default: 600)

/// The measurement number `index`: flags 0x10 (8-bit rate, RR intervals), a rate of 60–99 and
/// one RR interval, as heart-rate-peripheral sends.
func measurement(_ index: Int) -> [UInt8] {
    let bpm = 60 + index % 40
    let rr = UInt16(61_440 / bpm)
    return [0x10, UInt8(bpm), UInt8(rr & 0xFF), UInt8(rr >> 8)]
}

func run() async -> Int32 {
    let bluez: SimulatedBlueZ
    do {
        bluez = try await SimulatedBlueZ.start()
    } catch {
        fail("cannot start the simulator: \(error)")
    }
    defer { bluez.stop() }
    let rate = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
    let location = SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x01])
    let sensor = SimulatedPeripheral(
        address: "C0:FF:EE:00:00:01", name: "BlueZKit Bench", serviceUUIDs: ["180D"],
        services: [SimulatedService(uuid: "180D", characteristics: [rate, location])])
    do {
        try bluez.addPeripheral(sensor)
    } catch {
        fail("cannot add the sensor: \(error)")
    }

    let process = Process()
    process.executableURL = URL(fileURLWithPath: receiver[0].contains("/") ? receiver[0] : "/usr/bin/env")
    process.arguments = receiver[0].contains("/") ? Array(receiver.dropFirst()) : receiver
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SYSTEM_BUS_ADDRESS"] = bluez.busAddress
    process.environment = environment
    do {
        try process.run()
    } catch {
        fail("cannot run \(receiver[0]): \(error)")
    }

    let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
    var notified = 0
    var index = 0
    while process.isRunning {
        guard ContinuousClock.now < deadline else {
            process.terminate()
            FileHandle.standardError.write(Data("NotifyPathProfile: timed out after \(timeoutSeconds) s\n".utf8))
            return 1
        }
        if rate.isNotifying {
            if rate.notify(measurement(index)) { notified += 1 }
            index += 1
        }
        try? await Task.sleep(for: .milliseconds(intervalMilliseconds))
    }
    process.waitUntilExit()
    // The receiver is this process's only child: RUSAGE_CHILDREN is its use alone.
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    let cpuMicroseconds =
        (Int(usage.ru_utime.tv_sec) + Int(usage.ru_stime.tv_sec)) * 1_000_000 + Int(usage.ru_utime.tv_usec)
        + Int(usage.ru_stime.tv_usec)
    let line =
        "{\"notified\": \(notified), \"status\": \(process.terminationStatus), "
        + "\"cpu_us\": \(cpuMicroseconds), \"voluntary_switches\": \(usage.ru_nvcsw), "
        + "\"involuntary_switches\": \(usage.ru_nivcsw)}\n"
    FileHandle.standardError.write(Data(line.utf8))
    return process.terminationStatus
}

let status = Mutex<Int32>(1)
let done = DispatchSemaphore(value: 0)
Task.detached {
    let result = await run()
    status.withLock { $0 = result }
    done.signal()
}
done.wait()
exit(status.withLock { $0 })
