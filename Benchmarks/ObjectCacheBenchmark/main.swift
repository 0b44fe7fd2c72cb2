// ObjectCacheBenchmark — the Swift side of the object-cache comparison in Scripts/benchmark.
//
//   ObjectCacheBenchmark generate FILE [DEVICES]
//       Writes a GetManagedObjects method return in wire form (dbus_message_marshal)
//       as bluetoothd 5.66 would send it: the BlueZ root and hci0 objects, then
//       DEVICES (default 1000) devices with every Device1 property and the
//       Properties and Introspectable entries bluetoothd lists for each object.
//   ObjectCacheBenchmark run FILE ITERATIONS
//       Reads FILE once, demarshals it (libdbus validates it, as on receipt), then
//       times ITERATIONS builds of the object cache's tree from the received
//       message, as BlueZObjectCache does on load
//       (BlueZObjectCache.decodeManagedObjects(reply:)). Prints
//       "cache_ms MEDIAN MIN MAX", then for information
//       "iter_ms …"      the previous path (DBusMessageIter: arguments() + decodeManagedObjects),
//       "demarshal_ms …" libdbus's demarshalling and validation of the bytes alone,
//       and "objects N devices M properties P" (checked against the file's content).
//   ObjectCacheBenchmark profile FILE ITERATIONS
//       The cache path alone, untimed (for callgrind or perf).

import BlueZ
import DBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ text: String) -> Never {
    var line = Array("ObjectCacheBenchmark: \(text)\n".utf8)
    _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    exit(1)
}

func printLine(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

// MARK: - generate

func hex(_ value: Int, _ digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}

let empty: DBusValue = .dictionary(key: "s", value: "v", [])

/// The entries of a{sa{sv}} for one object: its interfaces, with Properties and Introspectable.
func interfaces(_ own: [(String, [String: DBusValue])]) -> DBusValue {
    var entries: [DBusValue.DictionaryEntry] = [
        .init(.string("org.freedesktop.DBus.Introspectable"), empty)
    ]
    for (name, properties) in own {
        entries.append(.init(.string(name), .stringVariantDictionary(properties)))
    }
    entries.append(.init(.string("org.freedesktop.DBus.Properties"), empty))
    return .dictionary(key: "s", value: "a{sv}", entries)
}

func device(_ index: Int) -> [String: DBusValue] {
    let address = (0..<6).map { hex(($0 == 0 ? 0xC0 : 0) | (index >> (8 * (5 - $0)) & 0xFF) ^ ($0 == 5 ? 0x5A : 0), 2) }
        .joined(separator: ":")
    let uuids = [
        "0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb",
        "0000180a-0000-1000-8000-00805f9b34fb", "0000fe9f-0000-1000-8000-00805f9b34fb",
        "6e400001-b5a3-f393-e0a9-e50e24dcca9e",
    ].prefix(2 + index % 4)
    let bytes = (0..<(8 + index % 17)).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) }
    return [
        "Address": .string(address),
        "AddressType": .string(index % 3 == 0 ? "public" : "random"),
        "Name": .string("Sensor \(index)"),
        "Alias": .string("Sensor \(index)"),
        "Class": .uint32(0x240404),
        "Appearance": .uint16(0x0341),
        "Icon": .string("input-gaming"),
        "Paired": .bool(index % 5 == 0),
        "Bonded": .bool(index % 5 == 0),
        "Trusted": .bool(index % 7 == 0),
        "Blocked": .bool(false),
        "LegacyPairing": .bool(false),
        "RSSI": .int16(Int16(-40 - index % 60)),
        "TxPower": .int16(Int16(index % 9) - 4),
        "Connected": .bool(false),
        "UUIDs": .stringArray(Array(uuids)),
        "Modalias": .string("usb:v1D6Bp0246d05\(hex(index % 256, 2))"),
        "Adapter": .objectPath(try! ObjectPath("/org/bluez/hci0")),
        "ManufacturerData": .dictionary(
            key: "q", value: "v",
            [.init(.uint16(UInt16(0x004C + index % 3)), .variant(.bytes(bytes)))]),
        "ServiceData": .dictionary(
            key: "s", value: "v",
            [.init(.string("0000fe9f-0000-1000-8000-00805f9b34fb"), .variant(.bytes(Array(bytes.prefix(12)))))]),
        "ServicesResolved": .bool(false),
        "AdvertisingFlags": .bytes([0x06]),
    ]
}

func managedObjects(devices: Int) throws(DBusError) -> DBusValue {
    var entries: [DBusValue.DictionaryEntry] = []
    entries.append(
        .init(
            .objectPath(try ObjectPath("/org/bluez")),
            interfaces([
                ("org.bluez.AgentManager1", [:]), ("org.bluez.ProfileManager1", [:]),
                ("org.bluez.HealthManager1", [:]),
            ])))
    entries.append(
        .init(
            .objectPath(try ObjectPath("/org/bluez/hci0")),
            interfaces([
                (
                    "org.bluez.Adapter1",
                    [
                        "Address": .string("00:1A:7D:DA:71:13"), "AddressType": .string("public"),
                        "Name": .string("bench"), "Alias": .string("bench"), "Class": .uint32(0x6c010c),
                        "Powered": .bool(true), "Discoverable": .bool(false), "DiscoverableTimeout": .uint32(180),
                        "Pairable": .bool(true), "PairableTimeout": .uint32(0), "Discovering": .bool(true),
                        "UUIDs": .stringArray(["00001801-0000-1000-8000-00805f9b34fb"]),
                        "Modalias": .string("usb:v1D6Bp0246d0542"),
                        "Roles": .stringArray(["central", "peripheral"]),
                    ]
                ),
                ("org.bluez.GattManager1", [:]), ("org.bluez.Media1", [:]), ("org.bluez.NetworkServer1", [:]),
                (
                    "org.bluez.LEAdvertisingManager1",
                    [
                        "ActiveInstances": .byte(0), "SupportedInstances": .byte(5),
                        "SupportedIncludes": .stringArray(["tx-power", "appearance", "local-name"]),
                    ]
                ),
            ])))
    for index in 0..<devices {
        let address = device(index)["Address"]!.stringValue!.replacingOccurrences(":", "_")
        entries.append(
            .init(
                .objectPath(try ObjectPath("/org/bluez/hci0/dev_" + address)),
                interfaces([("org.bluez.Device1", device(index))])))
    }
    return .dictionary(key: "o", value: "a{sa{sv}}", entries)
}

extension String {
    func replacingOccurrences(_ a: Character, _ b: Character) -> String { String(map { $0 == a ? b : $0 }) }
}

func generate(file: String, devices: Int) throws(DBusError) {
    let call = try DBusMessage.methodCall(
        destination: "org.bluez", path: .root, interface: .objectManager, member: "GetManagedObjects")
    call.setSerial(7)
    let reply = try DBusMessage.methodReturn(to: call, arguments: [try managedObjects(devices: devices)])
    reply.setSerial(8)
    let bytes = try reply.marshalled()
    guard let handle = fopen(file, "wb") else { fail("cannot write \(file)") }
    let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, handle) }
    fclose(handle)
    guard written == bytes.count else { fail("short write to \(file)") }
    printLine("wrote \(bytes.count) bytes, \(devices) devices")
}

// MARK: - run

func readFile(_ file: String) -> [UInt8] {
    guard let handle = fopen(file, "rb") else { fail("cannot read \(file)") }
    defer { fclose(handle) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, handle) }
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    return bytes
}

func nanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// "MEDIAN MIN MAX" in milliseconds.
func summary(_ samples: [UInt64]) -> String {
    let sorted = samples.sorted()
    let n = sorted.count
    let median = n % 2 == 1 ? Double(sorted[n / 2]) : (Double(sorted[n / 2 - 1]) + Double(sorted[n / 2])) / 2
    return [median, Double(sorted[0]), Double(sorted[n - 1])].map { format($0 / 1e6) }.joined(separator: " ")
}

func format(_ x: Double) -> String {
    let scaled = Int((x * 10000).rounded())
    let fraction = String(scaled % 10000)
    return "\(scaled / 10000)." + String(repeating: "0", count: 4 - fraction.count) + fraction
}

/// Keeps results alive so that nothing is optimised away.
nonisolated(unsafe) var sink = 0

func time(_ iterations: Int, _ body: () -> Int) -> [UInt64] {
    for _ in 0..<3 { sink &+= body() }  // warm-up
    var samples: [UInt64] = []
    for _ in 0..<iterations {
        let start = nanoseconds()
        sink &+= body()
        samples.append(nanoseconds() - start)
    }
    return samples
}

func run(file: String, iterations: Int) throws(DBusError) {
    let bytes = readFile(file)
    let reply = try DBusMessage.demarshal(bytes)
    guard let tree = BlueZObjectCache.decodeManagedObjects(reply: reply) else { fail("the reply has the wrong shape") }
    let devices = tree.values.filter { $0["org.bluez.Device1"] != nil }.count
    let properties = tree.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } }
    // The two paths must agree before either is timed.
    guard let viaIter = (try reply.arguments()).first.flatMap(BlueZObjectCache.decodeManagedObjects),
        viaIter == tree
    else { fail("the DBusMessageIter path gives another tree") }

    var cache: [UInt64] = []
    var iter: [UInt64] = []
    var demarshal: [UInt64] = []
    // Interleaved in rounds, so that a slow moment of the machine hits all variants.
    let rounds = 5
    let perRound = max(1, iterations / rounds)
    for _ in 0..<rounds {
        cache += time(perRound) { BlueZObjectCache.decodeManagedObjects(reply: reply)?.count ?? 0 }
        iter += time(max(1, perRound / 3)) {
            ((try? reply.arguments())?.first.flatMap(BlueZObjectCache.decodeManagedObjects))?.count ?? 0
        }
        demarshal += time(max(1, perRound / 3)) { ((try? DBusMessage.demarshal(bytes)) != nil) ? 1 : 0 }
    }
    printLine("cache_ms " + summary(cache))
    printLine("iter_ms " + summary(iter))
    printLine("demarshal_ms " + summary(demarshal))
    printLine("objects \(tree.count) devices \(devices) properties \(properties)")
}

// MARK: - main

func count(_ text: String) -> Int {
    guard let n = Int(text), n > 0 else { fail("not a positive count: \(text)") }
    return n
}

let arguments = CommandLine.arguments
do throws(DBusError) {
    switch (arguments.count > 1 ? arguments[1] : "", arguments.count) {
    case ("generate", 3), ("generate", 4):
        try generate(file: arguments[2], devices: arguments.count == 4 ? count(arguments[3]) : 1000)
    case ("run", 4):
        try run(file: arguments[2], iterations: count(arguments[3]))
    case ("profile", 4):
        // The cache path alone, for callgrind or perf.
        let reply = try DBusMessage.demarshal(readFile(arguments[2]))
        for _ in 0..<count(arguments[3]) { sink &+= BlueZObjectCache.decodeManagedObjects(reply: reply)?.count ?? 0 }
    default:
        fail("usage: ObjectCacheBenchmark generate FILE [DEVICES] | run FILE ITERATIONS")
    }
} catch {
    fail("\(error)")
}
exit(sink == -1 ? 1 : 0)
