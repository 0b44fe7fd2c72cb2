internal import DBus
import Glibc
import Locking
import Synchronization

/// A simulated bluetoothd 5.66 on a private `dbus-daemon`: adapters, virtual peripherals, and fault injection.
///
/// Start one, point the code under test at ``busAddress`` (set
/// `DBUS_SYSTEM_BUS_ADDRESS` to it, or connect to it directly), and drive
/// the radio side through ``SimulatedAdapter`` and ``SimulatedPeripheral``:
///
/// ```swift
/// let bluez = try await SimulatedBlueZ.start()
/// defer { bluez.stop() }
/// let heartRate = SimulatedPeripheral(address: "C0:FF:EE:00:00:01", name: "HRM", serviceUUIDs: ["180D"], services: [...])
/// try bluez.addPeripheral(heartRate)
/// ```
///
/// It owns `org.bluez` and serves what bluetoothd 5.66 serves: the object
/// manager at `/`, `org.bluez.Adapter1`, `org.bluez.Device1` for discovered
/// peripherals, and their GATT objects once connected — with bluetoothd's
/// error names and messages and gdbus's signal order (property changes
/// coalesced per object, signals flushed before each reply). Where it
/// deliberately differs from bluetoothd:
/// - every `advertise()` is one report: there is no kernel duplicate filter,
///   and nothing is reported between advertisements (a scan restart reports
///   every peripheral in range once);
/// - temporary devices are removed after `TemporaryTimeout` only when
///   ``Options/temporaryTimeout`` is set (bluetoothd's default is 30 s; the simulator's is no
///   timer), and non-connectable ones when discovery stops;
/// - there is no BR/EDR: every device is LE, and `Transport` `bredr` finds nothing;
/// - `AdvertisementMonitorManager1` is served only with ``Options/advertisementMonitor``
///   (bluetoothd's `--experimental`), and its monitors report every matching advertisement with
///   `DeviceFound`, never `DeviceLost` (``SimulatedAdvertisementMonitor``);
/// - `AdvertisingFlags` is always served (bluetoothd needs `--experimental`);
///   `AdvertisingData`, `WakeAllowed`, `Icon` and `Class` of devices are not;
/// - `Introspect` returns only the standard interfaces (the D-Bus layer answers it);
/// - pairing follows the LE capability matrix between the agent's registered capability and
///   the peripheral's (``SimulatedPeripheral``, just works by default), with no PIN codes, agent
///   timeouts or out-of-band data. As bluetoothd 5.66: `Pair` uses the caller's agent or the
///   default one and accepts just works without asking; pairing that an encrypted read or
///   write starts asks the default agent (the last `RequestDefaultAgent`) only; without an
///   agent, or when it refuses, the link drops and the operation fails with ATT 0x0E;
/// - `AcquireWrite` and `AcquireNotify` hand out real `SOCK_SEQPACKET` sockets with 5.66's
///   behaviour and quirks (notifications go to the socket, not to `Value`; each datagram sent is
///   a write command, dropped when longer than the MTU less 3; an empty datagram stops the
///   reading), but the hang-up of a socket that stopped reading is polled for every 20 ms;
/// - a ``SimulatedCentral`` that is the first to subscribe to a characteristic with
///   `NotifyAcquired` makes bluetoothd call the application's `AcquireNotify`, and what the
///   application writes to that socket reaches every subscribed central, as in 5.66;
/// - `GattManager1` registers applications for ``SimulatedCentral``s to use, but
///   does not publish them to other simulated adapters, and ignores changes to an
///   application's tree after it registered;
/// - `LEAdvertisingManager1` ignores `Data`, `Duration`, `DiscoverableTimeout`,
///   the intervals and `TxPower` (as bluetoothd does without `--experimental`);
///   a registered advertisement is seen by the other adapters present (merged
///   with the adapter's other advertisements, as one device).
public final class SimulatedBlueZ: Sendable {
    let core: SimulatorCore
    private let daemon: PrivateBusDaemon
    private let handles = PosixMutex<[String: SimulatedAdapter]>([:])
    private let stopped = Atomic<Bool>(false)

    /// The private bus's address, for `DBUS_SYSTEM_BUS_ADDRESS` (its GUID changes with
    /// ``restartBus(downtime:)``; its path does not).
    public var busAddress: String { daemon.address }

    private init(core: SimulatorCore, daemon: PrivateBusDaemon) {
        self.core = core
        self.daemon = daemon
    }

    /// Starts a private bus and a simulated bluetoothd with `adapters` on it; returns once it owns `org.bluez`.
    ///
    /// - Throws: ``SimulatedBlueZError`` with `busUnavailable` when `dbus-daemon`
    ///   cannot run, `invalidConfiguration` for a bad adapter address, or
    ///   `alreadyExists` for two adapters with one name or address.
    public static func start(
        adapters: [SimulatedAdapter.Configuration] = [.default], options: Options = Options()
    ) async throws(SimulatedBlueZError) -> SimulatedBlueZ {
        let daemon: PrivateBusDaemon
        do {
            daemon = try PrivateBusDaemon()
        } catch {
            throw SimulatedBlueZError(.busUnavailable, "cannot start dbus-daemon: \(error)")
        }
        let bluez = SimulatedBlueZ(core: SimulatorCore(options: options), daemon: daemon)
        var present: [AdapterState] = []
        for configuration in adapters {
            let (name, address) = try bluez.resolve(configuration, taken: present.map { ($0.name, $0.address) })
            present.append(AdapterState(name: name, address: address, configuration: configuration))
            bluez.handle(name: name, address: address)
        }
        do throws(SimulatedBlueZError) {
            try await bluez.core.connect(to: daemon.address, adapters: present)
        } catch {
            bluez.stop()
            throw error
        }
        return bluez
    }

    /// Stops bluetoothd and the private bus (idempotent; also done on deinit).
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        resumeBus()
        core.disconnectNow()
        daemon.stop()
    }

    deinit { stop() }

    /// Restarts bluetoothd on the same bus: `org.bluez` is released and owned again by a new connection.
    ///
    /// Clients see `NameOwnerChanged` (the name lost, then a new owner), and
    /// calls in flight fail with `NoReply`. The new instance starts fresh:
    /// adapters with their configured power state, no discovery sessions,
    /// filters, notification sessions or registrations, and only the bonded
    /// devices (reloaded from storage, disconnected). Injected faults stay.
    ///
    /// - Parameter downtime: how long `org.bluez` stays without an owner.
    public func restart(downtime: Duration = .zero) async throws(SimulatedBlueZError) {
        guard !stopped.load(ordering: .acquiring) else {
            throw SimulatedBlueZError(.stopped, "the simulator was stopped")
        }
        let present = await core.disconnect(flushing: true)
        if downtime > .zero { try? await Task.sleep(for: downtime) }
        try await core.connect(to: busAddress, adapters: present)
    }

    /// Restarts the private bus's `dbus-daemon` on the same socket path, as when the system bus
    /// restarts: every connection to it is lost at once, with its names and match rules.
    ///
    /// bluetoothd exits when it loses the bus (its service manager starts it again), so the
    /// simulated bluetoothd comes back on the new bus as after ``restart(downtime:)``: fresh,
    /// with only its bonded devices. Clients must connect again themselves.
    ///
    /// - Parameter downtime: how long no bus listens on the path.
    public func restartBus(downtime: Duration = .zero) async throws(SimulatedBlueZError) {
        guard !stopped.load(ordering: .acquiring) else {
            throw SimulatedBlueZError(.stopped, "the simulator was stopped")
        }
        resumeBus()
        daemon.kill()
        let present = await core.disconnect(flushing: false)
        if downtime > .zero { try? await Task.sleep(for: downtime) }
        do throws(DBusError) {
            try daemon.relaunch()
        } catch {
            throw SimulatedBlueZError(.busUnavailable, "cannot start dbus-daemon again: \(error)")
        }
        try await core.connect(to: busAddress, adapters: present)
    }

    /// Stops the private bus's `dbus-daemon` from running (`SIGSTOP`): nothing is read from or
    /// delivered to any connection until ``resumeBus()``. Senders then see their sockets fill up —
    /// the way to test back-pressure (``resumeBus()`` also runs when the simulator stops).
    public func pauseBus() {
        guard !stopped.load(ordering: .acquiring) else { return }
        kill(daemon.processIdentifier, SIGSTOP)
    }

    /// Lets the private bus run again after ``pauseBus()``.
    public func resumeBus() {
        kill(daemon.processIdentifier, SIGCONT)
    }

    // MARK: Adapters

    /// The adapters present, by index.
    public var adapters: [SimulatedAdapter] {
        core.adapterList().map { handle(name: $0.name, address: $0.address) }
    }

    /// The adapter named `name` (such as `hci0`), if present.
    public func adapter(named name: String) -> SimulatedAdapter? {
        adapters.first { $0.name == name }
    }

    /// Plugs in an adapter: clients see `InterfacesAdded` for it, then for its bonded devices.
    ///
    /// Re-adding an adapter that was removed (same name and address) brings back
    /// its bonded devices and the peripherals in its range.
    @discardableResult
    public func addAdapter(_ configuration: SimulatedAdapter.Configuration) throws(SimulatedBlueZError)
        -> SimulatedAdapter
    {
        let taken = core.adapterList().map { ($0.name, $0.address) }
        let (name, address) = try resolve(configuration, taken: taken)
        if let error = core.addAdapter(name: name, address: address, configuration: configuration) { throw error }
        return handle(name: name, address: address)
    }

    /// Unplugs an adapter: `InterfacesRemoved` for its devices (and their GATT objects), then for the adapter.
    public func removeAdapter(_ adapter: SimulatedAdapter) {
        _ = core.removeAdapter(name: adapter.name)
    }

    private func resolve(_ configuration: SimulatedAdapter.Configuration, taken: [(String, String)])
        throws(SimulatedBlueZError) -> (String, String)
    {
        var name = configuration.name
        if name == nil {
            var index = 0
            while taken.contains(where: { $0.0 == "hci\(index)" }) { index += 1 }
            name = "hci\(index)"
        }
        guard let name, !name.isEmpty,
            name.unicodeScalars.allSatisfy({
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
            })
        else {
            throw SimulatedBlueZError(.invalidConfiguration, "invalid adapter name '\(configuration.name ?? "")'")
        }
        let known = handles.withLock { $0[name]?.address }
        let index = Int(name.dropFirst(3)) ?? 0
        let fallback = "00:AA:01:00:00:" + (index < 16 ? "0" : "") + String(index % 256, radix: 16).uppercased()
        guard let address = BluetoothText.address(configuration.address ?? known ?? fallback) else {
            throw SimulatedBlueZError(.invalidConfiguration, "invalid adapter address '\(configuration.address ?? "")'")
        }
        guard !taken.contains(where: { $0.0 == name || $0.1 == address }) else {
            throw SimulatedBlueZError(.alreadyExists, "an adapter \(name) or \(address) exists")
        }
        return (name, address)
    }

    @discardableResult
    private func handle(name: String, address: String) -> SimulatedAdapter {
        handles.withLock { handles in
            if let existing = handles[name], existing.address == address { return existing }
            let adapter = SimulatedAdapter(name: name, address: address, core: core)
            handles[name] = adapter
            return adapter
        }
    }

    // MARK: Peripherals

    /// Puts `peripheral` in range of `adapter` (the first adapter when nil).
    ///
    /// If the adapter is discovering and the peripheral is in range, it is
    /// reported at once, as its first advertisement.
    ///
    /// - Throws: `invalidConfiguration` for a bad address, UUID or flag;
    ///   `alreadyExists` when the peripheral was added before or another one has its
    ///   address; `notFound` when the adapter is not present.
    public func addPeripheral(_ peripheral: SimulatedPeripheral, to adapter: SimulatedAdapter? = nil)
        throws(SimulatedBlueZError)
    {
        guard let name = adapter?.name ?? core.adapterList().first?.name else {
            throw SimulatedBlueZError(.notFound, "there is no adapter")
        }
        if let error = core.attach(peripheral, adapter: name) { throw error }
    }

    /// The device vanishes from bluetoothd's cache, as after `RemoveDevice` or its temporary timeout:
    /// `InterfacesRemoved` for its GATT objects and `Device1`, mid-operation if need be.
    ///
    /// As in bluetoothd 5.66, a `Connect` waiting on the device is never
    /// answered and a `Pair` fails with `ConnectionAttemptFailed`. The
    /// peripheral stays in range: it is discovered again when it advertises.
    ///
    /// - Returns: false when bluetoothd had no device for the peripheral.
    @discardableResult
    public func removeDevice(_ peripheral: SimulatedPeripheral) -> Bool {
        core.vanish(peripheral)
    }

    /// Takes `peripheral` off the air for good, as a phone that rotated its private address is no
    /// longer heard at the old one: a connection to it drops (link loss), it stops advertising, and
    /// the simulator lets go of it (it can be added again, to this or another simulator).
    ///
    /// bluetoothd keeps its device as it would: until ``Options/temporaryTimeout`` runs out for a
    /// temporary one, until `RemoveDevice`, or for good once paired. A `Connect` to it waits and
    /// fails after the connect timeout. Removing peripherals that are done with keeps the
    /// simulator's memory flat when it is fed ever new ones.
    ///
    /// - Returns: false when the peripheral was not added to this simulator.
    @discardableResult
    public func removePeripheral(_ peripheral: SimulatedPeripheral) -> Bool {
        core.detach(peripheral)
    }

    // MARK: Centrals

    /// Connects a virtual central with `address` to `adapter` (the first adapter when nil), to act on
    /// the GATT applications registered there; see ``SimulatedCentral``. Clients see its `Device1`
    /// appear connected (when the adapter is powered; else call ``SimulatedCentral/connect()`` later).
    ///
    /// - Parameter mtu: the ATT MTU of the link (the `mtu` option the applications see).
    /// - Throws: `invalidConfiguration` for a bad address; `notFound` when the adapter is not present.
    public func addCentral(address: String, to adapter: SimulatedAdapter? = nil, mtu: UInt16 = 23)
        throws(SimulatedBlueZError) -> SimulatedCentral
    {
        guard let canonical = BluetoothText.address(address) else {
            throw SimulatedBlueZError(.invalidConfiguration, "invalid central address '\(address)'")
        }
        guard let target = adapter ?? adapters.first, target.isPresent else {
            throw SimulatedBlueZError(.notFound, "there is no adapter")
        }
        let central = SimulatedCentral(address: canonical, adapter: target, mtu: mtu, core: core)
        central.connect()
        return central
    }

    // MARK: Faults

    /// Makes the next `count` calls of `method` (at `path`, or anywhere) misbehave as `fault`.
    ///
    /// Faults apply to well-formed calls only (a call with the wrong
    /// signature still gets `UnknownMethod`) and in the order injected.
    /// Use `Int.max` for a fault that never wears off.
    public func inject(_ fault: SimulatedFault, for method: SimulatedMethod, count: Int = 1, path: String? = nil) {
        core.inject(fault, for: method, count: count, path: path)
    }

    /// How many injected faults have not fired yet (each of `count` calls counts once): a test
    /// waits for 0 to know the calls it expected have reached bluetoothd.
    public var unfiredFaultCount: Int { core.unfiredFaultCount() }

    /// Removes every injected fault that has not fired yet.
    public func clearFaults() {
        core.clearFaults()
    }

    /// Breaks property `name` of `interface` at object `path` until cleared; see ``SimulatedPropertyOverride``.
    public func overrideProperty(
        _ name: String, of interface: String, at path: String, with override: SimulatedPropertyOverride
    ) {
        core.overrideProperty(PropertyKey(path: path, interface: interface, name: name), override)
    }

    /// Breaks property `name` of `org.bluez.Adapter1` on `adapter`; see ``SimulatedPropertyOverride``.
    public func overrideProperty(_ name: String, on adapter: SimulatedAdapter, with override: SimulatedPropertyOverride)
    {
        overrideProperty(name, of: "org.bluez.Adapter1", at: adapter.objectPath, with: override)
    }

    /// Breaks property `name` of the `org.bluez.Device1` bluetoothd keeps for `peripheral` (once added).
    public func overrideProperty(
        _ name: String, on peripheral: SimulatedPeripheral, with override: SimulatedPropertyOverride
    ) {
        guard let path = peripheral.devicePath else { return }
        overrideProperty(name, of: "org.bluez.Device1", at: path, with: override)
    }

    /// Removes the override of one property, announcing its real value again.
    public func clearPropertyOverride(_ name: String, of interface: String, at path: String) {
        core.overrideProperty(PropertyKey(path: path, interface: interface, name: name), nil)
    }

    /// Removes every property override, announcing the real values again.
    public func clearPropertyOverrides() {
        core.clearOverrides()
    }

    // MARK: Package API

    /// The unique bus name of the current bluetoothd connection (it changes on restart).
    package var ownerUniqueName: String? { core.uniqueName }

    /// Whether bluetoothd is trying to connect to `peripheral` (a `Connect` or `Pair` waits for the link).
    package func isConnecting(to peripheral: SimulatedPeripheral) -> Bool {
        core.run { core.devicePath(of: peripheral).flatMap { core.devices[$0]?.isConnecting } ?? false }
    }

    /// How many calls bluetoothd holds without answering (`noReply` faults, a device removed under a `Connect`).
    package var unansweredCallCount: Int { core.run { core.heldInvocations.count } }

    /// The service UUIDs and the pattern of each discovery filter set on `adapter`, oldest client
    /// first (no UUIDs: an empty array; clients without a filter are left out).
    package func discoveryFilters(on adapter: SimulatedAdapter) -> [(uuids: [String], pattern: String?)] {
        core.run {
            core.adapters[adapter.name]?.clients.compactMap { $0.filter.map { ($0.uuids, $0.pattern) } } ?? []
        }
    }

    /// How many devices bluetoothd holds (for the benchmarks).
    package var deviceCount: Int { core.run { core.devices.count } }

    /// Whether a `Pair` of `peripheral` is in progress.
    package func isPairing(_ peripheral: SimulatedPeripheral) -> Bool {
        core.run { core.devicePath(of: peripheral).flatMap { core.devices[$0]?.bonding != nil } ?? false }
    }
}
