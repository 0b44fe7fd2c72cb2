internal import DBus
import Dispatch

/// The simulated bluetoothd: all of its state, its event loop and its D-Bus connection.
///
/// Threading: every piece of mutable state below is touched only on `queue`,
/// a serial queue that plays bluetoothd's main loop — the invariant behind
/// `@unchecked Sendable`. Method calls arrive from the connection's queue and
/// hop here with `queue.async`; the public API hops here with `run` (a
/// `queue.sync`, or a direct call when already on the queue, as from a
/// peripheral's read handler). Nothing on `queue` ever waits for the
/// connection's queue, so the two never deadlock.
///
/// Every turn of the loop ends with `flushSignals()`, and every reply
/// flushes first — gdbus's rule, which decides the order clients see.
final class SimulatorCore: @unchecked Sendable {
    let queue = DispatchQueue(label: "bluezkit.simulated-bluez")
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    let options: SimulatedBlueZ.Options

    // Queue-confined state.
    var connection: DBusConnection?
    var connectionSubscriptions: [DBusSubscription] = []
    /// Bumped when bluetoothd restarts: work scheduled before is dropped.
    var epoch = 0
    var adapters: [String: AdapterState] = [:]
    var devices: [ObjectPath: DeviceState] = [:]
    var gattObjects: [ObjectPath: GATTNode] = [:]
    /// Peripherals in range of each adapter name.
    var air: [String: [SimulatedPeripheral]] = [:]
    /// Bonded devices per adapter address, as bluetoothd stores them in `/var/lib/bluetooth`.
    var storage: [String: [String: StoredDevice]] = [:]
    var faults: [FaultRule] = []
    var overrides: [PropertyKey: SimulatedPropertyOverride] = [:]
    var pendingSignals = PendingSignals()
    /// Calls that are never answered (`noReply` faults, a device removed under a `Connect`).
    var heldInvocations: [DBusMethodInvocation] = []
    /// Calls that reached a bluetoothd that has since restarted; released once their connection closed.
    var graveyard: [DBusMethodInvocation] = []
    /// Work scheduled by a bluetoothd that has since restarted. It may hold calls: releasing them
    /// before their connection closed would answer them `Failed` instead of leaving them to `NoReply`.
    var staleWork: [@Sendable () -> Void] = []
    var agents: [String: ObjectPath] = [:]
    /// The capability each agent owner registered with (`RegisterAgent`'s second argument).
    var agentCapabilities: [String: String] = [:]
    /// bluetoothd's queue of default agents by owner, the default one first: every registered
    /// agent is in it (`SimulatorCore+DefaultAgent.swift`).
    var defaultAgents: [String] = []
    /// The agent request open for each device's pairing (owner and agent path), which
    /// bluetoothd cancels (`Agent1.Cancel`) when the pairing ends first (`agent_cancel`).
    var openAgentRequests: [ObjectPath: (owner: BusName, agent: ObjectPath)] = [:]
    /// The requests waiting for each device's pairing for security (`SimulatorCore+GATT.swift`):
    /// one pairing serves every request made while it runs, as the kernel's one SMP session does.
    var securityWaiters: [ObjectPath: [@Sendable (Bool) -> Void]] = [:]
    /// The lines bluetoothd's debug log has for changes of the default agent, oldest first
    /// ("Default agent set to OWNER PATH", "Default agent cleared"); kept across restarts.
    var defaultAgentLog: [String] = []
    /// GATT applications registered (or being registered) with `GattManager1`, oldest first.
    var applications: [ApplicationRegistration] = []
    /// Centrals subscribed to each application characteristic (owner and path), as `ntfy_cnt`.
    var applicationNotifyCounts: [String: Int] = [:]
    /// The `notify_io` of application characteristics that gave a socket through `AcquireNotify`.
    var applicationNotifySockets: [String: DescriptorReadiness] = [:]
    /// The descriptor each of those sockets reads (to write confirmations back, 5.80).
    var applicationNotifyDescriptors: [String: Int32] = [:]
    /// What each subscribed central does with a value read from such a socket, by key and address.
    var applicationNotifyHandlers: [String: [String: @Sendable ([UInt8]) -> Void]] = [:]
    /// Addresses of centrals whose notify sockets bluetoothd does not read (a stall, 5.82).
    var stalledNotifyCentrals: Set<String> = []
    /// Sockets of stalled centrals whose closing waits for the stall to end, by key.
    var heldNotifySocketCloses: Set<String> = []
    /// Advertisements registered (or being registered) with `LEAdvertisingManager1`, oldest first.
    var advertisements: [AdvertisementRegistration] = []
    /// Advertisement monitor roots registered with `AdvertisementMonitorManager1`, oldest first.
    var monitorApps: [MonitorApp] = []
    /// The paths of the monitors bluetoothd called `Release` on, per adapter name.
    var releasedMonitors: [String: [String]] = [:]
    /// The peripheral standing for one adapter's advertising in range of another, by `source>target`.
    /// They stay in `air` across restarts (out of range until advertised again).
    var advertisingMirrors: [String: SimulatedPeripheral] = [:]
    var nextAttemptID = 0
    /// Connection attempts past their link-setup delay, waiting for the peripheral to be reachable.
    var armedAttempts: [ObjectPath: Int] = [:]
    /// Devices whose `RemoveDevice` waits for the disconnection.
    var removalRequested: Set<ObjectPath> = []
    /// The temporary timers of devices (`SimulatorCore+TemporaryDevices.swift`).
    var temporaryTimers = TemporaryTimers()

    init(options: SimulatedBlueZ.Options) {
        self.options = options
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
    }

    var isOnQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

    /// Runs `body` on the queue and waits; flushes signals afterwards unless already inside a turn.
    func run<T>(_ body: () -> T) -> T {
        if isOnQueue { return body() }
        return queue.sync {
            let result = body()
            flushSignals()
            return result
        }
    }

    /// Runs `body` on the queue later, as one turn of the loop, unless bluetoothd restarted since `epoch`.
    ///
    /// Never waits for the queue: callers on the connection's queue must not block on this one.
    func perform(ifEpoch scheduled: Int, _ body: @escaping @Sendable () -> Void) {
        queue.async {
            guard self.epoch == scheduled else { return self.staleWork.append(body) }
            body()
            self.flushSignals()
        }
    }

    /// On the queue: runs `body` after `delay` as one turn of the loop, unless bluetoothd restarted meanwhile.
    func after(_ delay: Duration, _ body: @escaping @Sendable () -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        let scheduled = epoch
        let (seconds, attoseconds) = delay.components
        let nanoseconds = max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) {
            guard self.epoch == scheduled else { return self.staleWork.append(body) }
            body()
            self.flushSignals()
        }
    }

    func makeAttemptID() -> Int {
        nextAttemptID += 1
        return nextAttemptID
    }

    // MARK: Replies

    /// Answers a call after sending every pending signal (gdbus flushes before each message).
    func reply(_ invocation: DBusMethodInvocation, _ values: [DBusValue] = []) {
        flushSignals(beforeReply: true)
        invocation.reply(values)
    }

    /// Answers a call with an error after sending every pending signal.
    func reply(_ invocation: DBusMethodInvocation, error: DBusError) {
        flushSignals(beforeReply: true)
        invocation.reply(error: error)
    }

    /// Keeps a call unanswered until bluetoothd restarts or stops.
    func hold(_ invocation: DBusMethodInvocation) {
        heldInvocations.append(invocation)
    }

    // MARK: Lookups

    func adapter(at path: ObjectPath) -> AdapterState? {
        guard path.parent?.rawValue == "/org/bluez" else { return nil }
        return adapters[String(path.rawValue.dropFirst("/org/bluez/".count))]
    }

    static func adapterPath(_ name: String) -> ObjectPath {
        (try? ObjectPath("/org/bluez/" + name)) ?? .root
    }

    static func devicePath(adapter: String, address: String) -> ObjectPath {
        (try? ObjectPath("/org/bluez/\(adapter)/" + BluetoothText.deviceElement(address))) ?? .root
    }

    /// The device bluetoothd keeps for `peripheral`, if any.
    func devicePath(of peripheral: SimulatedPeripheral) -> ObjectPath? {
        guard let adapter = peripheral.attachment.withLock({ $0.adapterName }) else { return nil }
        let path = Self.devicePath(adapter: adapter, address: peripheral.address)
        return devices[path] == nil ? nil : path
    }

    /// The peripheral in range of `adapter` with `address`, if one was added.
    func peripheral(adapter: String, address: String) -> SimulatedPeripheral? {
        air[adapter]?.first { $0.address == address }
    }

    func peripheral(of device: DeviceState) -> SimulatedPeripheral? {
        peripheral(adapter: device.adapterName, address: device.address)
    }
}
