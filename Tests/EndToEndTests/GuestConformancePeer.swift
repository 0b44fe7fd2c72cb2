import BluetoothdConformance
import DBus
import Foundation
import Locking
import TestSupport
import Testing

/// The guest's real bluetoothd as a conformance body sees it: the system bus, adapter hci0, and
/// its debug log's default-agent lines.
enum GuestBluetoothd {
    /// The release the guest runs (`BLUEZKIT_BLUEZ_VERSION`, exported by the guest).
    static var version: BluetoothdUnderTest.Version {
        BluetoothdUnderTest.Version(parsing: emulatedBlueZVersion) ?? BluetoothdUnderTest.Version(5, 66)
    }

    /// The system bus's address.
    static var busAddress: String {
        ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? "unix:path=/run/dbus/system_bus_socket"
    }

    /// hci0 of the guest's bluetoothd; its default-agent log starts at the log's present end.
    static func underTest(adapter: String = "hci0") -> BluetoothdUnderTest {
        let start = EndToEndScope.logSize()
        return BluetoothdUnderTest(
            name: "bluetoothd", version: version, busAddress: busAddress, adapter: adapter,
            defaultAgentLog: { defaultAgentLines(since: start) })
    }

    /// The lines of bluetoothd's log (`bluetoothd -d`) written after `offset` that set or clear
    /// the default agent (`src/agent.c`: "Default agent set to …", "Default agent cleared").
    static func defaultAgentLines(since offset: UInt64) -> [String] {
        guard let handle = FileHandle(forReadingAtPath: EndToEndScope.bluetoothdLog) else { return [] }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        let text = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").filter { $0.contains("Default agent") }.map(String.init)
    }
}

/// hci1 of the guest as the peer: BlueZ's own `example-advertisement` and `example-gatt-server`
/// (judges nobody here wrote) for the central-role bodies, and `Device1` calls on hci1 for a
/// central that connects to hci0.
final class GuestConformancePeer: ConformancePeer {
    private let example: PosixMutex<ExamplePeripheral>
    private let running = PosixMutex<Set<String>>([])
    private let hci1 = GuestBluetoothd.underTest(adapter: "hci1")
    /// hci1's client for the central role, opened on first use.
    private let central = PosixMutex<BlueZCalls?>(nil)

    init() throws { example = PosixMutex(try ExamplePeripheral()) }

    var address: String { get async throws { try await BluetoothctlSession.address(of: "hci1") } }

    /// btvirt relays an advertisement about every 100 ms to 1 s; several pass in 20 s.
    var absenceWait: Duration { .seconds(20) }

    func startAdvertising() async throws {
        try await start("example-advertisement", registered: "Advertisement registered")
    }

    /// A copy of the (adapter-patched) `example-advertisement` whose advertisement is of type
    /// `broadcast`: bluetoothd advertises it not connectable.
    func startBroadcasting() async throws {
        let example = example.withLock { $0 }
        let source = example.directory.appendingPathComponent("example-advertisement")
        let text = try String(contentsOf: source, encoding: .utf8)
        #expect(text.contains("'peripheral')"), "example-advertisement no longer names its type 'peripheral'")
        try text.replacingOccurrences(of: "'peripheral')", with: "'broadcast')")
            .write(to: example.directory.appendingPathComponent("example-broadcast"), atomically: true, encoding: .utf8)
        try await start("example-broadcast", registered: "Advertisement registered")
    }

    func startGATTServer() async throws {
        try await start("example-gatt-server", registered: "GATT application registered")
        try await startAdvertising()
    }

    private func start(_ script: String, registered: String) async throws {
        guard running.withLock({ $0.insert(script).inserted }) else { return }
        let example = example.withLock { $0 }
        try example.start(script)
        let diagnostics = { example.log(script) }
        try await pollUntil("\(script) registered", timeout: .seconds(60), diagnostics: diagnostics) {
            example.log(script).contains(registered)
        }
    }

    /// Stops the scripts: bluetoothd drops the advertisement, and hci1 stops advertising.
    func goSilent() async throws {
        let old = example.withLock { $0 }
        old.stop()
        running.withLock { $0.removeAll() }
        let fresh = try ExamplePeripheral()
        example.withLock { $0 = fresh }
    }

    // MARK: Central on hci1

    private func centralClient() async throws -> BlueZCalls {
        if let client = central.withLock({ $0 }) { return client }
        let client = try await BlueZCalls.open(hci1, label: "conformance.central")
        central.withLock { $0 = client }
        return client
    }

    /// hci0 as hci1 sees it.
    private func hci0Path() async throws -> String {
        hci1.devicePath(try await BluetoothctlSession.address(of: "hci0"))
    }

    func connectAsCentral() async throws {
        let client = try await centralClient()
        let path = try await hci0Path()
        if try await !client.exists(path) {
            try await client.discover(path, on: hci1) {}
        }
        try await client.call(path, "org.bluez.Device1", "Connect", timeout: .seconds(60))
        try await client.waitForProperty(
            path, "org.bluez.Device1", "ServicesResolved", toBe: .bool(true), timeout: .seconds(60))
    }

    func subscribe(service: String, characteristic: String) async throws {
        let client = try await centralClient()
        let path = try await hci0Path()
        let objects = try await client.managedObjects()
        var target: String?
        for (object, interfaces) in objects.sorted(by: { $0.key < $1.key })
        where object.hasPrefix(path + "/") && interfaces.contains("org.bluez.GattCharacteristic1") {
            let uuid = await client.property(object, "org.bluez.GattCharacteristic1", "UUID")?.stringValue
            guard uuid?.lowercased() == characteristic.lowercased() else { continue }
            let parent = String(object[..<(object.lastIndex(of: "/") ?? object.endIndex)])
            let serviceUUID = await client.property(parent, "org.bluez.GattService1", "UUID")?.stringValue
            if serviceUUID?.lowercased() == service.lowercased() { target = object }
        }
        guard let target else { throw ExampleProgramError(description: "hci1 has no \(characteristic) of hci0") }
        try await client.call(target, "org.bluez.GattCharacteristic1", "StartNotify")
    }

    /// `Device1.Pair` from hci1 with no agent of its own (NoInputNoOutput: just works); hci0's
    /// side asks the default agent, the body's.
    func pairAsCentral() async throws {
        let client = try await centralClient()
        let path = try await hci0Path()
        try await client.call(path, "org.bluez.Device1", "Pair", timeout: .seconds(60))
        try await client.waitForProperty(path, "org.bluez.Device1", "Paired", toBe: .bool(true))
    }

    func disconnectAsCentral() async throws {
        let client = try await centralClient()
        let path = try await hci0Path()
        try await client.call(path, "org.bluez.Device1", "Disconnect")
        try await client.waitForProperty(path, "org.bluez.Device1", "Connected", toBe: .bool(false))
    }

    func stop() async {
        example.withLock { $0 }.stop()
        if let client = central.withLock({ $0 }) {
            if let path = try? await hci0Path() {
                _ = await client.error(
                    hci1.adapterPath, "org.bluez.Adapter1", "RemoveDevice", [.objectPath(try! ObjectPath(path))])
            }
            client.close()
        }
    }
}
