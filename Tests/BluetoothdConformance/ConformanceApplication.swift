import DBus
import Locking

/// Our side in the peripheral role, as a program using BlueZ's D-Bus API is: a GATT application
/// (one service with one notifying characteristic) and an LE advertisement of that service, on
/// their own connection, registered with the adapter under test.
///
/// It records the `StartNotify` and `StopNotify` calls bluetoothd makes.
public final class ConformanceApplication: Sendable {
    /// The service's UUID (ours, so no cached database of another test matches it).
    public static let service = "5a1e0c0c-b1e2-4c00-9e00-000000000001"
    /// The notifying characteristic's UUID.
    public static let characteristic = "5a1e0c0c-b1e2-4c00-9e00-0000000000a1"

    static let root = "/conformance/app"
    static let servicePath = root + "/service0"
    static let characteristicPath = servicePath + "/char0"
    static let advertisementPath = "/conformance/advertisement0"

    private let client: BlueZCalls
    private let adapterPath: String
    private let calls = PosixMutex<[String]>([])

    private init(client: BlueZCalls, adapterPath: String) {
        self.client = client
        self.adapterPath = adapterPath
    }

    /// `StartNotify` / `StopNotify`, in the order bluetoothd called them.
    public var notifyCalls: [String] { calls.withLock { $0 } }

    /// Exports the application and the advertisement and registers both on the adapter under test.
    public static func register(on bluetoothd: BluetoothdUnderTest) async throws -> ConformanceApplication {
        let client = try await BlueZCalls.open(bluetoothd, label: "conformance.application")
        let application = ConformanceApplication(client: client, adapterPath: bluetoothd.adapterPath)
        do {
            try await application.export()
            try await client.call(
                bluetoothd.adapterPath, "org.bluez.GattManager1", "RegisterApplication",
                [.objectPath(ObjectPath(root)), .stringVariantDictionary([:])])
            try await client.call(
                bluetoothd.adapterPath, "org.bluez.LEAdvertisingManager1", "RegisterAdvertisement",
                [.objectPath(ObjectPath(advertisementPath)), .stringVariantDictionary([:])])
        } catch {
            client.close()
            throw error
        }
        return application
    }

    /// Unregisters both (errors ignored) and closes the connection.
    public func unregister() async {
        _ = await client.error(
            adapterPath, "org.bluez.LEAdvertisingManager1", "UnregisterAdvertisement",
            [.objectPath(try! ObjectPath(Self.advertisementPath))])
        _ = await client.error(
            adapterPath, "org.bluez.GattManager1", "UnregisterApplication", [.objectPath(try! ObjectPath(Self.root))])
        client.close()
    }

    private func export() async throws {
        let connection = client.connection
        try await connection.addObjectManager(at: ObjectPath(Self.root))
        let constant = { (name: String, value: DBusValue) in DBusProperty(name, value.signature, get: { value }) }
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.GattService1",
                    properties: [constant("UUID", .string(Self.service)), constant("Primary", .bool(true))])
            ], at: ObjectPath(Self.servicePath))
        let calls = self.calls
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.GattCharacteristic1",
                    methods: [
                        DBusMethod("StartNotify") { invocation in
                            calls.withLock { $0.append("StartNotify") }
                            invocation.reply()
                        },
                        DBusMethod("StopNotify") { invocation in
                            calls.withLock { $0.append("StopNotify") }
                            invocation.reply()
                        },
                        DBusMethod("ReadValue", in: "a{sv}", out: "ay") { $0.reply([.bytes([0])]) },
                    ],
                    properties: [
                        constant("UUID", .string(Self.characteristic)),
                        constant("Service", .objectPath(try ObjectPath(Self.servicePath))),
                        constant("Flags", .stringArray(["notify"])),
                    ])
            ], at: ObjectPath(Self.characteristicPath))
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.LEAdvertisement1",
                    methods: [DBusMethod("Release") { $0.reply() }],
                    properties: [
                        constant("Type", .string("peripheral")),
                        constant("ServiceUUIDs", .stringArray([Self.service])),
                    ])
            ], at: ObjectPath(Self.advertisementPath))
    }
}
