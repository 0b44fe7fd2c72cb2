import Locking

/// A characteristic in a simulated peripheral's GATT database.
///
/// Flags use BlueZ's vocabulary (`org.bluez.GattCharacteristic1.Flags`):
/// `broadcast`, `read`, `write-without-response`, `write`, `notify`,
/// `indicate`, `authenticated-signed-writes`, `extended-properties`,
/// `reliable-write`, `writable-auxiliaries`, `encrypt-read`, `encrypt-write`,
/// `encrypt-notify`, `encrypt-indicate`, `encrypt-authenticated-read`,
/// `encrypt-authenticated-write`, `secure-read`, `secure-write`,
/// `authorize`. The central sees them as bluetoothd 5.66 shows a remote
/// characteristic: only the properties (`encrypt-read` shows as `read`).
/// Reading an `encrypt-*` value from an unpaired central pairs first
/// (just-works, as the kernel raises the security level); `encrypt-authenticated-*`
/// and `secure-*` fail with `org.bluez.Error.NotPermitted` "Not paired"
/// until authenticated pairing exists (the agent comes later).
///
/// A characteristic belongs to one peripheral. Without handlers, reads return
/// ``value`` and writes store into it.
public final class SimulatedCharacteristic: Sendable {
    /// Serves a read: returns the whole value (the simulator applies the offset) or throws an ATT error.
    public typealias ReadHandler = @Sendable (SimulatedReadRequest) throws(SimulatedATTError) -> [UInt8]
    /// Serves a write, or throws an ATT error.
    public typealias WriteHandler = @Sendable (SimulatedWriteRequest) throws(SimulatedATTError) -> Void

    /// The UUID as given (16-, 32- or 128-bit form).
    public let uuid: String
    /// The flags as given.
    public let flags: [String]
    /// The descriptors as given (the simulator may add `2902` and `2900`).
    public let descriptors: [SimulatedDescriptor]
    let readHandler: ReadHandler?
    let writeHandler: WriteHandler?
    let storage: PosixMutex<[UInt8]>
    let link = AttributeLink()

    /// A characteristic with a stored value and optional handlers that replace the stored-value behaviour.
    public init(
        uuid: String, flags: [String], value: [UInt8] = [], descriptors: [SimulatedDescriptor] = [],
        onRead: ReadHandler? = nil, onWrite: WriteHandler? = nil
    ) {
        self.uuid = uuid
        self.flags = flags
        self.descriptors = descriptors
        self.storage = PosixMutex(value)
        self.readHandler = onRead
        self.writeHandler = onWrite
    }

    /// The value the peripheral stores (what a read returns when there is no read handler).
    public var value: [UInt8] {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Stores `value` and sends it as a notification (or indication) to the central, if subscribed.
    ///
    /// The central's bluetoothd then updates the characteristic's cached
    /// `Value` and emits `PropertiesChanged` — once per notification, even
    /// when the value did not change.
    ///
    /// - Returns: whether the notification was delivered: false when the
    ///   peripheral is not connected or the central has not enabled
    ///   notifications (its CCCD is off).
    @discardableResult
    public func notify(_ value: [UInt8]) -> Bool {
        self.value = value
        guard let peripheral = link.peripheral else { return false }
        return peripheral.deliverNotification(value, handle: link.handle)
    }

    /// Whether the central has enabled notifications or indications (written the CCCD).
    public var isNotifying: Bool {
        guard let peripheral = link.peripheral else { return false }
        return peripheral.isSubscribed(handle: link.handle)
    }

    /// Where bluetoothd exports this characteristic, once its peripheral was added to an adapter.
    public var objectPath: String? { link.objectPath() }
}
