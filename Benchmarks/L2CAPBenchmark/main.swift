// L2CAPBenchmark — an L2CAP channel against GATT notifications, same payload, same link.
//
//   L2CAPBenchmark [KIB]
//       Run inside the emulated BlueZ environment (`Scripts/bluez-vm run -- …`): a
//       PeripheralManager on hci1 publishes an L2CAP channel (its PSM in Apple's PSM
//       characteristic) and a notifying characteristic; a CentralManager on hci0, in the same
//       process, connects once, subscribes (AcquireNotify's socket where bluetoothd offers it),
//       reads the PSM and opens the channel. Then, over that one link, KIB KiB (default 256)
//       go from the peripheral to the central three ways, one after the other:
//         notify   updateValue with payloads of the link's ATT MTU minus 3 (at most 512),
//                  waiting for peripheralManagerIsReady when it returns false;
//         l2cap    the same payloads, each one L2CAPChannel.write (one SDU each);
//         l2cap-mtu one write of everything, split by the channel into SDUs of its MTU.
//       For each it prints the payload, bytes per second (first send to last byte received,
//       wall clock) and CPU per KiB: this process's (both managers: getrusage), bluetoothd's
//       and btvirt's (utime + stime from /proc/PID/stat), so that what bluetoothd relays for
//       GATT is counted.

import BlueZKit
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("L2CAPBenchmark: \(text)\n".utf8))
    exit(1)
}

/// Waits (polling every 2 ms) until `condition` holds, or fails after `seconds`.
@MainActor func wait(_ what: String, seconds: Double = 60, _ condition: () -> Bool) async {
    let deadline = Date() + seconds
    while !condition() {
        if Date() > deadline { fail("timed out waiting until \(what)") }
        try? await Task.sleep(for: .milliseconds(2))
    }
}

/// CPU seconds (user + system) of this process.
func ownCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// CPU seconds of the first process whose program (or the program its loader runs) is `name`
/// (nil when none).
func cpu(of name: String) -> Double? {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
    for pid in entries where pid.allSatisfy(\.isNumber) {
        // By its command line: bluetoothd 5.82 runs through its own loader, named ld-linux….
        guard let commandLine = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
            commandLine.split(separator: 0).prefix(4).contains(where: {
                String(decoding: $0, as: UTF8.self).split(separator: "/").last.map(String.init) == name
            }),
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { continue }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    return nil
}

final class Server: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.peripheral")
    let state = Mutex<(psm: L2CAPPSM?, added: Bool, subscriber: Central?, channel: L2CAPChannel?, ready: Int)>(
        (nil, false, nil, nil, 0))
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?) {
        if let error { fail("publish: \(error)") }
        state.withLock { $0.psm = PSM }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        if let error { fail("add: \(error)") }
        state.withLock { $0.added = true }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) { state.withLock { $0.subscriber = central } }
    func peripheralManager(_ peripheral: PeripheralManager, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        if let error { fail("incoming channel: \(error)") }
        state.withLock { $0.channel = channel }
    }
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        state.withLock { $0.ready += 1 }
    }
}

final class Client: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.central")
    let state = Mutex<(found: Peripheral?, events: [String], notified: Int, channel: L2CAPChannel?)>(
        (nil, [], 0, nil))
    func centralManagerDidUpdateState(_ central: CentralManager) {}
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) { state.withLock { $0.found = peripheral } }
    private func record(_ event: String, _ error: (any Error)?) {
        if let error { fail("\(event): \(error)") }
        state.withLock { $0.events.append(event) }
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) { record("services", error) }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record("characteristics", error)
    }
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) { record("notifying", error) }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if characteristic.uuid == notifyUUID {
            let count = characteristic.value?.count ?? 0
            state.withLock { $0.notified += count }
        } else {
            record("read", error)
        }
    }
    func peripheral(_ peripheral: Peripheral, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        if let error { fail("open: \(error)") }
        state.withLock { $0.channel = channel }
    }
}

let serviceUUID = BluetoothUUID(string: "5A1E0020-B1E2-4C00-9E00-000000000001")
let notifyUUID = BluetoothUUID(string: "5A1E0021-B1E2-4C00-9E00-000000000001")
let total = (CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 256) * 1024

let server = Server()
let manager = PeripheralManager(
    delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
await wait("hci1 powered on") { manager.state == .poweredOn }
manager.publishL2CAPChannel(withEncryption: false)
await wait("published") { server.state.withLock { $0.psm } != nil }
let psm = server.state.withLock { $0.psm! }
let stream = MutableCharacteristic(type: notifyUUID, properties: [.notify], value: nil, permissions: [])
let psmCharacteristic = MutableCharacteristic(
    type: BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
    value: Data([UInt8(psm & 0xFF), UInt8(psm >> 8)]), permissions: [.readable])
let service = MutableService(type: serviceUUID, primary: true)
service.characteristics = [stream, psmCharacteristic]
manager.add(service)
await wait("service added") { server.state.withLock { $0.added } }

let client = Client()
let central = CentralManager(
    delegate: client, queue: client.queue, options: CentralManagerOptions(adapter: "hci0", usesNotifySockets: true))
await wait("hci0 powered on") { central.state == .poweredOn }
central.scanForPeripherals(withServices: [serviceUUID])
manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
await wait("discovered") { client.state.withLock { $0.found } != nil }
central.stopScan()
let peripheral = client.state.withLock { $0.found! }
peripheral.delegate = client
central.connect(peripheral)
await wait("connected") { peripheral.state == .connected }
peripheral.discoverServices([serviceUUID])
await wait("services") { client.state.withLock { $0.events.contains("services") } }
guard let remote = peripheral.services?.first else { fail("no service") }
peripheral.discoverCharacteristics(nil, for: remote)
await wait("characteristics") { client.state.withLock { $0.events.contains("characteristics") } }
guard let remoteStream = remote.characteristics?.first(where: { $0.uuid == notifyUUID }),
    let remotePSM = remote.characteristics?.first(where: { $0.uuid != notifyUUID })
else { fail("no characteristics") }
peripheral.setNotifyValue(true, for: remoteStream)
await wait("subscribed") { server.state.withLock { $0.subscriber } != nil }
peripheral.readValue(for: remotePSM)
await wait("PSM read") { client.state.withLock { $0.events.contains("read") } }
peripheral.openL2CAPChannel(psm)
await wait("channel open") {
    client.state.withLock { $0.channel } != nil && server.state.withLock { $0.channel } != nil
}
let subscriber = server.state.withLock { $0.subscriber! }
// The link's ATT MTU minus 3, as the central knows it (bluetoothd 5.66 tells the peripheral
// side no MTU: its `maximumUpdateValueLength` stays at 20 there).
// An attribute value holds at most 512 bytes.
let payload = min(
    512, max(subscriber.maximumUpdateValueLength, peripheral.maximumWriteValueLength(for: .withoutResponse)))
let chunk = Data((0..<payload).map { UInt8(truncatingIfNeeded: $0) })
let count = (total + payload - 1) / payload
let bytes = count * payload
let centralChannel = client.state.withLock { $0.channel! }
let peripheralChannel = server.state.withLock { $0.channel! }

/// Runs `body`, which moves `bytes` bytes, and prints its rates.
@MainActor func measure(_ name: String, sdu: Int, _ body: () async -> Void) async {
    let (start, ownStart) = (Date(), ownCPU())
    let (daemonStart, btvirtStart) = (cpu(of: "bluetoothd") ?? 0, cpu(of: "btvirt") ?? 0)
    await body()
    let seconds = Date().timeIntervalSince(start)
    let own = ownCPU() - ownStart
    let daemon = (cpu(of: "bluetoothd") ?? 0) - daemonStart
    let btvirt = (cpu(of: "btvirt") ?? 0) - btvirtStart
    let kib = Double(bytes) / 1024
    print(
        String(
            format: "%@ sdu %d bytes %d: %.0f B/s, CPU per KiB: process %.1f µs, bluetoothd %.1f µs, btvirt %.1f µs",
            name, sdu, bytes, Double(bytes) / seconds, own / kib * 1e6, daemon / kib * 1e6, btvirt / kib * 1e6))
}

print("payload \(payload) bytes (ATT MTU - 3, at most 512), channel MTU \(peripheralChannel.maximumWriteLength)")
await measure("notify", sdu: payload) {
    var sent = 0
    while sent < count {
        // Counted before the call: the ready call may come before `updateValue` returns.
        let ready = server.state.withLock { $0.ready }
        if manager.updateValue(chunk, for: stream, onSubscribedCentrals: nil) {
            sent += 1
        } else {
            await wait("ready to update") { server.state.withLock { $0.ready } > ready }
        }
    }
    await wait("notifications received", seconds: 600) { client.state.withLock { $0.notified } >= bytes }
}

/// Reads from the central's side until `bytes` arrived.
@MainActor func drain() async -> Int {
    var received = 0
    while received < bytes {
        guard let sdu = try? await centralChannel.read() else { fail("channel ended after \(received) bytes") }
        received += sdu.count
    }
    return received
}

await measure("l2cap", sdu: payload) {
    async let received = drain()
    for _ in 0..<count {
        do { try await peripheralChannel.write(chunk) } catch { fail("write: \(error)") }
    }
    _ = await received
}
let everything = Data((0..<count).flatMap { _ in chunk })
await measure("l2cap-mtu", sdu: peripheralChannel.maximumWriteLength) {
    async let received = drain()
    do { try await peripheralChannel.write(everything) } catch { fail("write: \(error)") }
    _ = await received
}
centralChannel.close()
central.cancelPeripheralConnection(peripheral)
exit(0)
