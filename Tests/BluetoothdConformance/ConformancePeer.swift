/// The other side of the air, as a conformance body needs it: something on another adapter that
/// advertises, serves GATT, goes silent, or connects to us as a central.
///
/// In the fast tier a simulated peripheral or central; in the end-to-end tier hci1 of the same
/// guest, driven by BlueZ's own example scripts (`example-advertisement`,
/// `example-gatt-server`) or by `Device1` calls on the other adapter. Every method waits until
/// what it started is in effect (a script registered its advertisement), and throws when it did
/// not happen in time.
public protocol ConformancePeer: Sendable {
    /// The address the adapter under test sees the peer at (`AA:BB:CC:DD:EE:FF`).
    var address: String { get async throws }

    /// How long a body waits before it concludes that the peer was NOT reported: long enough for
    /// several of the peer's advertisements to have reached the adapter under test.
    var absenceWait: Duration { get }

    /// Starts advertising, connectable, with no discoverable bit in the Flags (a peripheral that
    /// is not discoverable, as `example-advertisement` on a non-discoverable adapter), with the
    /// Heart Rate service UUID (0x180D).
    func startAdvertising() async throws

    /// Starts advertising as ``startAdvertising()`` does but NOT connectable (a broadcaster),
    /// still without a discoverable bit. Stop it with ``goSilent()``.
    func startBroadcasting() async throws

    /// Serves a GATT database with at least one primary service (Heart Rate, 0x180D) to
    /// centrals that connect, and advertises as ``startAdvertising()`` does.
    func startGATTServer() async throws

    /// Stops advertising and accepting connections: a connection attempt to it times out.
    func goSilent() async throws

    /// Connects to the adapter under test as a central (a link from the other adapter).
    func connectAsCentral() async throws

    /// Subscribes (CCC write) to the characteristic `characteristic` of service `service` of the
    /// GATT application registered on the adapter under test; waits until bluetoothd took it.
    func subscribe(service: String, characteristic: String) async throws

    /// Pairs the connected central with the adapter under test and keeps the keys (a bond),
    /// with the agent the body registered answering on our side; throws when the peer cannot.
    func pairAsCentral() async throws

    /// Drops the central's link (a link loss from our side's point of view).
    func disconnectAsCentral() async throws

    /// Stops whatever the peer started (idempotent).
    func stop() async
}
