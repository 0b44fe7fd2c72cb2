import BlueZKitTesting
import BluetoothdConformance
import Locking
import Testing

/// The simulator playing the bluetoothd a conformance body judges, and the peer on its other side.
enum SimulatedBluetoothd {
    /// The release `version` plays, as the bodies compare it (`bluez5_82` → 5.82).
    static func version(_ version: SimulatedBlueZ.Version) -> BluetoothdUnderTest.Version {
        let digits = version.rawValue.dropFirst("bluez".count).split(separator: "_")
        return BluetoothdUnderTest.Version(Int(digits[0]) ?? 0, Int(digits[1]) ?? 0)
    }

    /// Starts a simulator playing `version` with one LE-only adapter, hci0 (as the guest's
    /// virtual controllers are); `bluetoothd` describes it for the bodies.
    static func start(_ version: SimulatedBlueZ.Version) async throws -> (SimulatedBlueZ, BluetoothdUnderTest) {
        let bluez = try await SimulatedBlueZ.start(
            adapters: [.init(name: "hci0", dualMode: false)], options: .init(version: version))
        let underTest = BluetoothdUnderTest(
            name: "simulator", version: Self.version(version), busAddress: bluez.busAddress,
            defaultAgentLog: { bluez.defaultAgentLog })
        return (bluez, underTest)
    }
}

/// A simulated peripheral (advertising without a discoverable flag, with a Heart Rate service and
/// a Battery service whose level falls while notified, as `example-gatt-server`'s) and, for the
/// peripheral-role bodies, a simulated central on the same adapter.
final class SimulatedConformancePeer: ConformancePeer {
    static let peripheralAddress = "C0:FF:EE:C0:FF:01"
    static let centralAddress = "C0:FF:EE:C0:FF:02"

    let bluez: SimulatedBlueZ
    /// Battery Level, 100 at first; lowered by 2 every 50 ms while notified (``startGATTServer()``).
    let batteryLevel: SimulatedCharacteristic
    let peripheral: SimulatedPeripheral
    private let drain = PosixMutex<Task<Void, Never>?>(nil)
    /// The same address as a broadcaster (not connectable), for ``startBroadcasting()``.
    let broadcaster = SimulatedPeripheral(
        address: peripheralAddress, name: "conformance", serviceUUIDs: ["180D"], advertisingFlags: 0x04,
        isConnectable: false)
    private let added = PosixMutex(false)
    private let central = PosixMutex<SimulatedCentral?>(nil)
    private let subscriptions = PosixMutex<[AsyncStream<[UInt8]>]>([])

    init(_ bluez: SimulatedBlueZ) {
        self.bluez = bluez
        let level = SimulatedCharacteristic(uuid: "2A19", flags: ["read", "notify"], value: [100])
        batteryLevel = level
        peripheral = SimulatedPeripheral(
            address: Self.peripheralAddress, name: "conformance", serviceUUIDs: ["180D"], advertisingFlags: 0x04,
            services: [
                SimulatedService(
                    uuid: "180D", characteristics: [SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])]),
                SimulatedService(uuid: "180F", characteristics: [level]),
            ])
    }

    var address: String { Self.peripheralAddress }

    /// The simulator reports an advertiser in the turn it advertises.
    var absenceWait: Duration { .milliseconds(500) }

    func startAdvertising() async throws {
        if added.withLock({ $0 }) {
            peripheral.setInRange(true)
            peripheral.advertise()
        } else {
            try bluez.addPeripheral(peripheral)
            added.withLock { $0 = true }
        }
    }

    func startGATTServer() async throws {
        try await startAdvertising()
        let level = batteryLevel
        drain.withLock { task in
            guard task == nil else { return }
            task = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                    guard level.isNotifying, let current = level.value.first else { continue }
                    level.notify([current >= 2 ? current - 2 : 0])
                }
            }
        }
    }

    func startBroadcasting() async throws {
        guard !added.withLock({ $0 }) else { throw SimulatedBlueZError(.alreadyExists, "already advertising") }
        try bluez.addPeripheral(broadcaster)
        added.withLock { $0 = true }
    }

    func goSilent() async throws {
        peripheral.setInRange(false)
        broadcaster.setInRange(false)
    }

    func connectAsCentral() async throws {
        if let central = central.withLock({ $0 }) {
            #expect(central.connect())
        } else {
            let central = try bluez.addCentral(address: Self.centralAddress)
            self.central.withLock { $0 = central }
        }
    }

    func subscribe(service: String, characteristic: String) async throws {
        guard let central = central.withLock({ $0 }) else { throw SimulatedBlueZError(.notFound, "no central") }
        let stream = try await central.subscribe(serviceUUID: service, characteristicUUID: characteristic)
        subscriptions.withLock { $0.append(stream) }
    }

    /// The simulated central cannot pair yet.
    func pairAsCentral() async throws {
        throw SimulatedBlueZError(.notFound, "a simulated central cannot bond")
    }

    func disconnectAsCentral() async throws {
        await central.withLock({ $0 })?.disconnect()
    }

    func stop() async {
        drain.withLock { $0 }?.cancel()
        await central.withLock({ $0 })?.disconnect()
        subscriptions.withLock { $0.removeAll() }
    }
}
