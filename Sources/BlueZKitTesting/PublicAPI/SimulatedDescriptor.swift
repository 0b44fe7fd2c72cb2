import Locking

/// A descriptor in a simulated peripheral's GATT database.
///
/// Give it to a ``SimulatedCharacteristic``. The simulator adds the Client
/// Characteristic Configuration descriptor (`2902`) to every characteristic
/// that can notify or indicate, and the Extended Properties descriptor
/// (`2900`) where needed, unless you list them yourself. bluetoothd shows the
/// descriptor as `org.bluez.GattDescriptor1` at `…/charYYYY/descZZZZ`, where
/// `ZZZZ` is its ATT handle.
public final class SimulatedDescriptor: Sendable {
    /// Serves a read: returns the whole value (the simulator applies the offset) or throws an ATT error.
    public typealias ReadHandler = @Sendable (SimulatedReadRequest) throws(SimulatedATTError) -> [UInt8]
    /// Serves a write, or throws an ATT error.
    public typealias WriteHandler = @Sendable (SimulatedWriteRequest) throws(SimulatedATTError) -> Void

    /// The UUID as given (16-, 32- or 128-bit form).
    public let uuid: String
    /// Permissions in BlueZ's vocabulary: `read`, `write`, `encrypt-read`, `encrypt-write`,
    /// `encrypt-authenticated-read`, `encrypt-authenticated-write`, `secure-read`, `secure-write`, `authorize`.
    public let flags: [String]
    let readHandler: ReadHandler?
    let writeHandler: WriteHandler?
    let storage: PosixMutex<[UInt8]>
    let link = AttributeLink()

    /// A descriptor with a stored value and optional handlers that replace the stored-value behaviour.
    public init(
        uuid: String, flags: [String] = ["read"], value: [UInt8] = [], onRead: ReadHandler? = nil,
        onWrite: WriteHandler? = nil
    ) {
        self.uuid = uuid
        self.flags = flags
        self.storage = PosixMutex(value)
        self.readHandler = onRead
        self.writeHandler = onWrite
    }

    /// The value the peripheral stores (what a read returns when there is no read handler).
    public var value: [UInt8] {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Where bluetoothd exports this descriptor, once its peripheral was added to an adapter.
    public var objectPath: String? { link.objectPath() }
}
