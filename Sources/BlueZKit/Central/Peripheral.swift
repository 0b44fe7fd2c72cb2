public import Foundation
import Locking

/// A remote peripheral seen by a central manager.
///
/// The manager hands out one `Peripheral` object per remote device and
/// reuses it for every later discovery. Properties are updated on the
/// manager's queue right before the delegate call that reports the change.
///
/// `Sendable` as the compiler checks it: every stored property is a `let`, what changes sits
/// behind a `PosixMutex`.
public final class Peripheral: Sendable, Hashable, CustomStringConvertible {
    /// A stable identifier, derived from the local adapter's and the
    /// device's addresses: the same across process and bluetoothd restarts,
    /// and different for the same device seen from another adapter — as on
    /// Apple's platforms, never hard-code it.
    public let identifier: UUID

    let deviceID: DeviceID
    /// The engine of the manager that made the peripheral; gone with that manager.
    weak let engine: CentralEngine?
    let mutable: PosixMutex<State>
    // The delegate, held weakly and typed (a cast from `AnyObject` on every event would cost a
    // conformance lookup), behind its own lock.
    private let delegateReference = WeakDelegate(DelegateReference())

    /// The delegate, held weakly.
    private struct DelegateReference {
        weak var object: (any PeripheralDelegate)?
    }

    struct State {
        var name: String?
        var address: String?
        var addressType: BluetoothAddressType?
        var state: PeripheralState = .disconnected
        var services: [Service]?
        var canSendWriteWithoutResponse = true
        /// Writes without response the app made that the bus queue has not taken yet.
        var handedOverWrites = 0
        /// ``canSendWriteWithoutResponse`` said false because of `handedOverWrites`: the
        /// delegate is owed `peripheralIsReady(toSendWriteWithoutResponse:)`.
        var readyOwed = false
        /// When the next ``readRSSI()`` may be answered (see ``rssiReadInterval``).
        var nextRSSIAnswer: DispatchTime?
        /// bluetoothd's `Battery1.Percentage` (``Peripheral/batteryLevel``).
        var batteryLevel: Int?
    }

    /// The least time between two answers to ``readRSSI()`` for one peripheral: a radio
    /// measures the signal of a connection event, so a read is not answered at once.
    static let rssiReadInterval: DispatchTimeInterval = .milliseconds(50)

    /// How long the ``readRSSI()`` asked for at `now` waits for its answer; books its slot.
    func rssiReadDelay(now: DispatchTime) -> DispatchTimeInterval {
        mutable.withLock { state in
            let due = max(now, state.nextRSSIAnswer ?? now)
            state.nextRSSIAnswer = due + Self.rssiReadInterval
            return .nanoseconds(Int(due.uptimeNanoseconds - now.uptimeNanoseconds))
        }
    }

    /// How many writes without response may wait to reach the bus queue before
    /// ``canSendWriteWithoutResponse`` says false (the app then waits for the ready call).
    static let handOverLimit = 8

    init(identifier: UUID, deviceID: DeviceID, name: String?, engine: CentralEngine) {
        self.identifier = identifier
        self.deviceID = deviceID
        self.engine = engine
        self.mutable = PosixMutex(State(name: name, address: deviceID.address))
    }

    /// The object that receives this peripheral's events (on the central manager's queue), held weakly.
    public var delegate: (any PeripheralDelegate)? {
        get { delegateReference.value.object }
        set { delegateReference.value = DelegateReference(object: newValue) }
    }

    /// The services discovered so far (nil before ``discoverServices(_:)``; cleared on disconnect).
    public var services: [Service]? { mutable.withLock { $0.services } }
    func update(services: [Service]?) { mutable.withLock { $0.services = services } }

    /// Whether a write without response goes out now (true) or has to wait its turn in this process.
    ///
    /// BlueZKit never drops a write without response: when the socket of `AcquireWrite` is full,
    /// or too many `WriteValue` commands wait for bluetoothd, writes queue here in order and this
    /// turns false; ``PeripheralDelegate/peripheralIsReady(toSendWriteWithoutResponse:)`` follows
    /// once they went out. Apps that stream should wait for that call, as on Apple's platforms.
    ///
    /// A write is handed to the manager's bus queue before it reaches that queue; while 8 writes
    /// wait for it, this is false too (and the ready call follows once they were taken), so that
    /// the usual loop `while canSendWriteWithoutResponse { writeValue(…) }` stops after a few
    /// writes and picks the length of the next from ``maximumWriteValueLength(for:)`` then.
    public var canSendWriteWithoutResponse: Bool {
        mutable.withLock { state in
            guard state.handedOverWrites < Self.handOverLimit else {
                state.readyOwed = true
                return false
            }
            return state.canSendWriteWithoutResponse
        }
    }

    func update(canSendWriteWithoutResponse: Bool) {
        mutable.withLock { state in
            state.canSendWriteWithoutResponse = canSendWriteWithoutResponse
            // The engine tells the delegate itself when its own wait ends.
            if canSendWriteWithoutResponse { state.readyOwed = false }
        }
    }

    /// The app handed a write without response over (any thread).
    func writeHandedOver() { mutable.withLock { $0.handedOverWrites += 1 } }

    /// The bus queue took a handed-over write; returns whether the delegate is owed its ready
    /// call now (nothing waits any more, and the engine's own path has room).
    func writeTaken() -> Bool {
        mutable.withLock { state in
            state.handedOverWrites -= 1
            guard state.readyOwed, state.handedOverWrites == 0, state.canSendWriteWithoutResponse else { return false }
            state.readyOwed = false
            return true
        }
    }

    /// Linux: the device's Bluetooth address, `"AA:BB:CC:DD:EE:FF"` (bluetoothd's
    /// `Device1.Address`, or the address its object path spells before bluetoothd reported it).
    ///
    /// Core Bluetooth has no such property; ``identifier`` is the stable way to name a peripheral.
    /// A device with a private address (``addressType`` `.random`) shows a new address, and so a
    /// new peripheral, whenever it changes it, unless it is paired (bluetoothd then resolves it).
    public var address: String? { mutable.withLock { $0.address } }

    /// Linux: whether ``address`` is public or random (`Device1.AddressType`); nil until
    /// bluetoothd reported it.
    public var addressType: BluetoothAddressType? { mutable.withLock { $0.addressType } }

    /// Takes what bluetoothd reports of the address (on the bus queue); keeps what it omits.
    func update(address: String?, type: String?) {
        mutable.withLock { state in
            if let address { state.address = address }
            if let type = type.flatMap(BluetoothAddressType.init(rawValue:)) { state.addressType = type }
        }
    }

    /// The device's name (BlueZ's `Name`, from the advertisement or the GAP service), if known.
    public var name: String? { mutable.withLock { $0.name } }

    /// The connection state.
    public var state: PeripheralState { mutable.withLock { $0.state } }

    func update(name: String?) { mutable.withLock { $0.name = name } }
    /// Sets ``state``, a projection of the engine's link (``CentralEngine/Link``): called only
    /// where the manager applies a `.link` event, on its queue.
    func update(state: PeripheralState) { mutable.withLock { $0.state = state } }
    /// `.connecting` at once when the app asks to connect a disconnected peripheral: Core
    /// Bluetooth's `state` reads `.connecting` right after `connect(_:options:)` returns. The
    /// engine's `.connecting` event, on the delegate queue later, confirms it. Called only by
    /// ``CentralEngine/connect(_:autoReconnect:)``.
    func markConnecting() {
        mutable.withLock { if $0.state == .disconnected { $0.state = .connecting } }
    }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: Peripheral, b: Peripheral) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The identifier and name.
    public var description: String { "Peripheral(\(identifier.uuidString), \(name ?? "unnamed"), \(state))" }
}

/// The connection state of a peripheral.
public enum PeripheralState: Int, Sendable, Hashable {
    /// Not connected, and no connection requested (0).
    case disconnected = 0
    /// A connection was requested and is pending; it never times out (1).
    case connecting = 1
    /// Connected (2).
    case connected = 2
    /// A disconnection was requested and is under way (3).
    case disconnecting = 3
}
