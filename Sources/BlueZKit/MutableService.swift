public import Foundation
import Synchronization

/// A service to publish with ``PeripheralManager/add(_:)``.
///
/// The invariant behind `@unchecked Sendable`: mutable state sits behind a `Mutex`.
public final class MutableService: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The service's UUID.
    public let uuid: BluetoothUUID
    /// Whether it is a primary service.
    public let isPrimary: Bool
    private let list = Mutex<[MutableCharacteristic]?>(nil)
    private let includes = Mutex<[MutableService]?>(nil)

    /// A service of type `type`; add characteristics before publishing it.
    public init(type: BluetoothUUID, primary: Bool) {
        self.uuid = type
        self.isPrimary = primary
    }

    /// The characteristics to publish; set before ``PeripheralManager/add(_:)``.
    public var characteristics: [MutableCharacteristic]? {
        get { list.withLock { $0 } }
        set { list.withLock { $0 = newValue } }
    }

    /// The services this service includes (GATT's Include declarations); set before
    /// ``PeripheralManager/add(_:)``.
    ///
    /// BlueZ resolves an included service only inside the GATT application that includes it
    /// (the `Includes` property of `org.bluez.GattService1`), so the application registered for
    /// this service also carries every service it includes, directly or not, each once and
    /// before the services that include it. An included service you also added on its own moves
    /// into that application while this service is published (see
    /// <doc:CoreBluetoothDifferences>). A service that includes itself through a cycle is refused:
    /// `didAdd` reports ``BluetoothError/Code/invalidParameters``.
    public var includedServices: [MutableService]? {
        get { includes.withLock { $0 } }
        set { includes.withLock { $0 = newValue } }
    }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: MutableService, b: MutableService) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The UUID.
    public var description: String { "MutableService(\(uuid))" }
}

/// A characteristic to publish.
///
/// One created with a `value` is static: the library answers reads itself
/// and the value cannot change (Core Bluetooth's rule; it must be read-only).
/// One created with nil is dynamic: reads and writes reach the delegate.
/// The invariant behind `@unchecked Sendable`: mutable state sits behind a `Mutex`.
public final class MutableCharacteristic: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The characteristic's UUID.
    public let uuid: BluetoothUUID
    /// What centrals may do.
    public let properties: CharacteristicProperties
    /// Who may read and write the value.
    public let permissions: AttributePermissions
    private let state: Mutex<(value: Data?, descriptors: [MutableDescriptor]?)>
    private let subscribers = Mutex<[Central]>([])

    /// Creates a characteristic; a non-nil `value` makes it static (cached, read-only).
    public init(
        type: BluetoothUUID, properties: CharacteristicProperties, value: Data?, permissions: AttributePermissions
    ) {
        self.uuid = type
        self.properties = properties
        self.permissions = permissions
        self.state = Mutex((value, nil))
    }

    /// The static value given at creation; nil for a dynamic characteristic (whose reads reach
    /// the delegate and whose updates go out with ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)``).
    public var value: Data? {
        get { state.withLock { $0.value } }
        set { state.withLock { $0.value = newValue } }
    }

    /// The descriptors to publish with it.
    public var descriptors: [MutableDescriptor]? {
        get { state.withLock { $0.descriptors } }
        set { state.withLock { $0.descriptors = newValue } }
    }

    /// The centrals subscribed to this characteristic's notifications or indications,
    /// as the peripheral manager last reported them with `didSubscribeTo` / `didUnsubscribeFrom`.
    public var subscribedCentrals: [Central]? { subscribers.withLock { $0 } }

    func setSubscribedCentrals(_ centrals: [Central]) { subscribers.withLock { $0 = centrals } }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: MutableCharacteristic, b: MutableCharacteristic) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The UUID and properties.
    public var description: String { "MutableCharacteristic(\(uuid), \(properties))" }
}

/// A descriptor to publish, with a static value.
public final class MutableDescriptor: Sendable, Hashable {
    /// The descriptor's UUID.
    public let uuid: BluetoothUUID
    /// Its value (bytes).
    public let value: Data

    /// Creates a descriptor with a static value.
    public init(type: BluetoothUUID, value: Data) {
        self.uuid = type
        self.value = value
    }

    /// Whether `a` and `b` are the same object (identity, as Core Bluetooth's objects compare).
    public static func == (a: MutableDescriptor, b: MutableDescriptor) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
