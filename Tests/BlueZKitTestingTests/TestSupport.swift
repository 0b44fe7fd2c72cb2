import BlueZKitTesting
import DBus
import Testing

/// A running simulator with one client, stopped together.
struct Rig {
    let bluez: SimulatedBlueZ
    let client: BlueZClient

    static func start(
        adapters: [SimulatedAdapter.Configuration] = [.default], options: SimulatedBlueZ.Options = .init()
    ) async throws -> Rig {
        let bluez = try await SimulatedBlueZ.start(adapters: adapters, options: options)
        return Rig(bluez: bluez, client: try await BlueZClient(address: bluez.busAddress))
    }

    func stop() {
        client.close()
        bluez.stop()
    }
}

let adapterPath = "/org/bluez/hci0"
let adapterInterface = "org.bluez.Adapter1"
let deviceInterface = "org.bluez.Device1"
let characteristicInterface = "org.bluez.GattCharacteristic1"
let descriptorInterface = "org.bluez.GattDescriptor1"

/// The 128-bit form of a 16-bit UUID.
func uuid16(_ short: String) -> String { "0000\(short.lowercased())-0000-1000-8000-00805f9b34fb" }

/// A `SetDiscoveryFilter` argument.
func filter(_ entries: [String: DBusValue]) -> DBusValue { .stringVariantDictionary(entries) }

/// Starts discovery and waits for `Discovering` to turn true.
func startDiscovery(_ client: BlueZClient, adapter: String = adapterPath) async throws {
    let mark = client.signals.count
    try await client.call(adapter, adapterInterface, "StartDiscovery")
    _ = await client.signals.expect(from: mark, "Discovering true") {
        $0.changes(adapter, adapterInterface, "Discovering", to: .bool(true))
    }
}

/// Registers an agent for the test's connection (never called: bluetoothd accepts just-works
/// for a `Pair` call on its own, but only when the caller or the default has an agent).
func registerPairingAgent(_ rig: Rig) async throws {
    try await rig.client.call(
        "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
        [.objectPath(try ObjectPath("/test/agent")), .string("NoInputNoOutput")])
}
