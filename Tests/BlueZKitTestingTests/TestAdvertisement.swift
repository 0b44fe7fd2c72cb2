import DBus
import Locking

/// A tiny `org.bluez.LEAdvertisement1` object on its own connection, as BlueZ's `example-advertisement`
/// exports one: properties for `GetAll`, and a `Release` method that counts its calls.
final class TestAdvertisement: Sendable {
    /// A count shared with the `Release` handler.
    final class Counter: Sendable {
        let value = PosixMutex(0)
    }

    let connection: DBusConnection
    let path: String
    private let releases = Counter()

    init(address: String, path: String = "/adv0", properties: [String: DBusValue]) async throws {
        connection = try await DBusConnection.open(address: address, label: "test.advertisement")
        self.path = path
        let exported = properties.keys.sorted().map { name in
            DBusProperty(name, properties[name]!.signature, get: { properties[name] })
        }
        let releases = self.releases
        let release = DBusMethod("Release") { invocation in
            releases.value.withLock { $0 += 1 }
            invocation.reply()
        }
        try await connection.export(
            [DBusInterface("org.bluez.LEAdvertisement1", methods: [release], properties: exported)],
            at: ObjectPath(path))
    }

    /// How many times bluetoothd called `Release`.
    var releaseCount: Int { releases.value.withLock { $0 } }

    /// `RegisterAdvertisement` from this connection; the error reply, or nil when it succeeded.
    func call(_ member: String, adapter: String = "/org/bluez/hci0") async -> DBusError? {
        do {
            _ = try await connection.call(
                destination: "org.bluez", path: ObjectPath(adapter), interface: "org.bluez.LEAdvertisingManager1",
                member: MemberName(member),
                arguments: [.objectPath(try ObjectPath(path))]
                    + (member == "RegisterAdvertisement" ? [.stringVariantDictionary([:])] : []))
            return nil
        } catch {
            return error
        }
    }

    func close() { connection.close() }
}
