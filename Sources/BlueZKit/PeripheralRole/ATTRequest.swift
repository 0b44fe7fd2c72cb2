import BlueZ
import Dispatch
public import Foundation
import Locking

/// A remote central, as a peripheral manager sees it.
public final class Central: Sendable, Hashable, CustomStringConvertible {
    /// A stable identifier derived from the adapter's and the central's addresses.
    public let identifier: UUID
    /// The largest value one notification to this central can carry: the ATT MTU minus 3.
    public let maximumUpdateValueLength: Int

    init(identifier: UUID, maximumUpdateValueLength: Int) {
        self.identifier = identifier
        self.maximumUpdateValueLength = maximumUpdateValueLength
    }

    /// Whether `a` and `b` are the same remote central: their identifiers are equal.
    public static func == (a: Central, b: Central) -> Bool { a.identifier == b.identifier }
    /// Hashes the identifier.
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    /// The identifier.
    public var description: String { "Central(\(identifier.uuidString))" }
}

/// A read or write request from a central, answered with ``PeripheralManager/respond(to:withResult:)``.
///
/// A request that waits for an answer holds one timer, which ``PeripheralManager/respond(to:withResult:)``
/// cancels; when it fires first, the central gets `unlikelyError`. A request released without an
/// answer (nothing holds it any more) is answered `unlikelyError` at once. A write without
/// response, acknowledged by bluetoothd before the app sees it, holds neither.
///
/// `Sendable` as the compiler checks it: `value` and the timer sit behind `PosixMutex`es.
public final class ATTRequest: Sendable, CustomStringConvertible {
    /// Who asked.
    public let central: Central
    /// The characteristic asked for.
    public let characteristic: MutableCharacteristic
    /// The offset into the value.
    public let offset: Int
    /// bluetoothd's request, to answer; nil when bluetoothd answered it already.
    let bluez: BlueZGattRequest?
    private let storage: PosixMutex<Data?>
    /// Answers `unlikelyError` when it fires; cancelled by the answer (cancelling is thread-safe
    /// and may be repeated). Its handler holds the request weakly.
    /// (Dispatch does not mark its sources `Sendable`: the lock makes the reference one.)
    private let timer: PosixMutex<(any DispatchSourceTimer)?>

    /// A request; with `bluez`, it is answered `unlikelyError` after `timeout` (on `queue`)
    /// unless answered before.
    init(
        central: Central, characteristic: MutableCharacteristic, offset: Int, value: Data?, bluez: BlueZGattRequest?,
        timeout: Duration, queue: DispatchQueue
    ) {
        self.central = central
        self.characteristic = characteristic
        self.offset = offset
        self.bluez = bluez
        self.storage = PosixMutex(value)
        self.timer = PosixMutex(nil)
        guard bluez != nil else { return }
        // Made inside the lock, so that the source goes nowhere else.
        timer.withLock { timer in
            let source = DispatchSource.makeTimerSource(queue: queue)
            source.schedule(deadline: .now() + timeout.dispatchInterval)
            // Weakly: the timer must not keep the request (and bluetoothd's message) alive.
            source.setEventHandler { [weak self] in self?.answer(.unlikelyError) }
            source.resume()
            timer = source
        }
    }

    /// For a read, set the value to answer with (from `offset` on); for a write, the value written.
    public var value: Data? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Whether an answer was given (or none is due: a write without response).
    var isAnswered: Bool { bluez?.isAnswered ?? true }

    /// Answers bluetoothd (the first answer only) and cancels the timer.
    func answer(_ result: ATTError.Code) {
        timer.withLock { $0?.cancel() }
        guard let bluez else { return }
        if result == .success {
            bluez.respond(Array(value ?? Data()))
        } else {
            bluez.fail(with: result)
        }
    }

    deinit {
        timer.withLock { $0?.cancel() }
        bluez?.fail(with: .unlikelyError)
    }

    /// The characteristic, offset and value length.
    public var description: String {
        "ATTRequest(\(characteristic.uuid), offset \(offset), \(value?.count ?? 0) bytes)"
    }
}
