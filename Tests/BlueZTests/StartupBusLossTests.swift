import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// A bus lost between `Hello` and the first `GetNameOwner` (the client starting just as the
/// `dbus-daemon` goes) is recovered like any other bus loss: bluetoothd is reported absent, then
/// found on the new bus. Before, the failed `GetNameOwner` failed the start, and the managers
/// stayed `.unsupported` for ever.
@Suite(.timeLimit(.minutes(1))) struct StartupBusLossTests {
    final class Statuses: Sendable {
        let values = PosixMutex<[BlueZClient.AdapterStatus]>([])
        var all: [BlueZClient.AdapterStatus] { values.withLock { $0 } }
    }

    @Test func aBusLostBeforeTheFirstOwnerLookUpIsJoinedAgainAndBluetoothdFound() async throws {
        let daemon = try PrivateBusDaemon()
        defer { daemon.stop() }
        let app = try await DBusConnection.open(
            address: daemon.address, label: "app",
            reconnect: DBusConnection.ReconnectPolicy(delays: [.milliseconds(20)]))
        defer { app.close() }

        // Registered (Hello answered), then the bus goes before the client asks who owns org.bluez.
        daemon.kill()
        try await waitUntil("the app knows the bus is gone") { app.isReconnecting }
        let statuses = Statuses()
        let client = BlueZClient(connection: app, adapter: nil) { event in
            if case .adapterChanged(let status) = event { statuses.values.withLock { $0.append(status) } }
        }
        try await client.start()
        defer { client.stop() }
        try await waitUntil("bluetoothd is reported absent") { statuses.all == [.serviceAbsent] }

        // The bus comes back, and bluetoothd on it: found, its tree loaded.
        try daemon.relaunch()
        let bluetoothd = try await DBusConnection.open(address: daemon.address, label: "bluetoothd")
        defer { bluetoothd.close() }
        let standIn = BlueZObjectCacheLoadTests.StandIn([.tree])
        try await bluetoothd.export([standIn.interface(on: bluetoothd)], at: .root)
        #expect(try await bluetoothd.requestName("org.bluez") == .primaryOwner)
        try await waitUntil("the adapter is found on the new bus") {
            statuses.all.last == .present(address: "00:AA:01:00:00:23", powered: true)
        }
    }
}
