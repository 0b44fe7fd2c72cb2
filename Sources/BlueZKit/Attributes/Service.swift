import BlueZ
public import Foundation
import Locking

/// A service of a remote peripheral, found by ``Peripheral/discoverServices(_:)``, as Core
/// Bluetooth's `CBService`.
///
/// As in Core Bluetooth, ``MutableService`` (a service you publish) is a subclass. Only
/// BlueZKit creates subclasses. The invariant behind `@unchecked Sendable`: mutable state
/// sits behind a `PosixMutex`, in this class and in its subclasses.
public class Service: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The service's UUID.
    public let uuid: BluetoothUUID
    /// Whether it is a primary service (false for secondary services).
    public let isPrimary: Bool
    /// The peripheral the service belongs to (nil for a ``MutableService``).
    public private(set) weak var peripheral: Peripheral?
    let id: BlueZClient.AttributeID
    private let discovered = PosixMutex<([Characteristic]?, [Service]?)>((nil, nil))

    init(uuid: BluetoothUUID, isPrimary: Bool, peripheral: Peripheral?, id: BlueZClient.AttributeID) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.peripheral = peripheral
        self.id = id
    }

    /// The characteristics discovered so far (nil before ``Peripheral/discoverCharacteristics(_:for:)``).
    public var characteristics: [Characteristic]? { discovered.withLock { $0.0 } }
    /// The included services discovered so far (nil before ``Peripheral/discoverIncludedServices(_:for:)``).
    public var includedServices: [Service]? { discovered.withLock { $0.1 } }

    func setCharacteristics(_ list: [Characteristic]?) { discovered.withLock { $0.0 = list } }
    func setIncludedServices(_ list: [Service]?) { discovered.withLock { $0.1 = list } }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: Service, b: Service) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The UUID and kind.
    public var description: String { "Service(\(uuid)\(isPrimary ? "" : ", secondary"))" }
}

/// A characteristic of a remote service, as Core Bluetooth's `CBCharacteristic`.
///
/// `value` and `isNotifying` are updated on the manager's queue right before
/// the delegate call that reports them. As in Core Bluetooth,
/// ``MutableCharacteristic`` is a subclass; only BlueZKit creates subclasses. The
/// invariant behind `@unchecked Sendable`: mutable state sits behind a `PosixMutex`, in
/// this class and in its subclasses.
public class Characteristic: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The characteristic's UUID.
    public let uuid: BluetoothUUID
    /// What the characteristic allows (from BlueZ's `Flags`).
    public var properties: CharacteristicProperties { fixedProperties }
    /// The properties given at creation.
    private let fixedProperties: CharacteristicProperties
    /// The service it belongs to (nil for a ``MutableCharacteristic``).
    public private(set) weak var service: Service?
    let id: BlueZClient.AttributeID
    private let mutable = PosixMutex<(value: Data?, notifying: Bool, descriptors: [Descriptor]?)>((nil, false, nil))

    init(
        uuid: BluetoothUUID, properties: CharacteristicProperties, service: Service?, id: BlueZClient.AttributeID
    ) {
        self.uuid = uuid
        self.fixedProperties = properties
        self.service = service
        self.id = id
    }

    /// The last value read or notified.
    public var value: Data? { mutable.withLock { $0.value } }
    /// Whether notifications or indications are on (``Peripheral/setNotifyValue(_:for:)``).
    public var isNotifying: Bool { mutable.withLock { $0.notifying } }
    /// The descriptors discovered so far (nil before ``Peripheral/discoverDescriptors(for:)``).
    public var descriptors: [Descriptor]? { mutable.withLock { $0.descriptors } }

    func update(value: Data?) { mutable.withLock { $0.value = value } }
    func update(notifying: Bool) { mutable.withLock { $0.notifying = notifying } }
    func setDescriptors(_ list: [Descriptor]) { mutable.withLock { $0.descriptors = list } }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: Characteristic, b: Characteristic) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The UUID and properties.
    public var description: String { "Characteristic(\(uuid), \(properties.names))" }
}

/// A descriptor of a remote characteristic, as Core Bluetooth's `CBDescriptor`.
///
/// As in Core Bluetooth, ``MutableDescriptor`` is a subclass; only BlueZKit creates
/// subclasses. The invariant behind `@unchecked Sendable`: mutable state sits behind a
/// `PosixMutex`, in this class and in its subclasses.
public class Descriptor: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The descriptor's UUID.
    public let uuid: BluetoothUUID
    /// The characteristic it belongs to (nil for a ``MutableDescriptor``).
    public private(set) weak var characteristic: Characteristic?
    let id: BlueZClient.AttributeID
    private let mutable = PosixMutex<Data?>(nil)

    init(uuid: BluetoothUUID, characteristic: Characteristic?, id: BlueZClient.AttributeID) {
        self.uuid = uuid
        self.characteristic = characteristic
        self.id = id
    }

    /// The last value read, typed as Core Bluetooth types it: an `NSNumber` for the Characteristic
    /// Extended Properties (`2900`) and the Client and Server Characteristic Configuration (`2902`,
    /// `2903`) descriptors, a `String` for the Characteristic User Description (`2901`), `Data`
    /// for every other descriptor; nil before a read.
    public var value: Any? { data.map { Self.coreBluetoothValue(of: $0, type: uuid) } }
    /// The bytes of the last value read, undecoded; nil before a read. A Linux addition.
    public var data: Data? { mutable.withLock { $0 } }
    func update(value: Data?) { mutable.withLock { $0 = value } }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: Descriptor, b: Descriptor) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The UUID.
    public var description: String { "Descriptor(\(uuid))" }
}
