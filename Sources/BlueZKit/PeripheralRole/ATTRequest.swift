import BlueZ
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
/// The invariant behind `@unchecked Sendable`: `value` sits behind a `PosixMutex`.
public final class ATTRequest: @unchecked Sendable, CustomStringConvertible {
    /// Who asked.
    public let central: Central
    /// The characteristic asked for.
    public let characteristic: MutableCharacteristic
    /// The offset into the value.
    public let offset: Int
    let bluez: BlueZGattRequest
    private let storage: PosixMutex<Data?>

    init(central: Central, characteristic: MutableCharacteristic, offset: Int, value: Data?, bluez: BlueZGattRequest) {
        self.central = central
        self.characteristic = characteristic
        self.offset = offset
        self.bluez = bluez
        self.storage = PosixMutex(value)
    }

    /// For a read, set the value to answer with (from `offset` on); for a write, the value written.
    public var value: Data? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// The characteristic, offset and value length.
    public var description: String {
        "ATTRequest(\(characteristic.uuid), offset \(offset), \(value?.count ?? 0) bytes)"
    }
}
