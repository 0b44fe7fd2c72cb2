public import Foundation
import Locking

/// A service to publish with ``PeripheralManager/add(_:)``, as Core Bluetooth's
/// `CBMutableService`: a ``Service`` subclass.
///
/// Its state lives in ``Service``'s `PosixMutex`, the invariant behind `@unchecked Sendable`.
public final class MutableService: Service, @unchecked Sendable {
    /// A service of type `type`; add characteristics before publishing it.
    public init(type: BluetoothUUID, primary: Bool) {
        super.init(uuid: type, isPrimary: primary, peripheral: nil, id: .local)
    }

    /// The characteristics to publish; set before ``PeripheralManager/add(_:)``.
    ///
    /// Core Bluetooth's type: the array holds ``MutableCharacteristic``s. An element of another
    /// class (a remote peripheral's ``Characteristic``) is not published; Core Bluetooth raises
    /// an exception for it.
    public override var characteristics: [Characteristic]? {
        get { super.characteristics }
        set { setCharacteristics(newValue) }
    }

    /// The services this service includes (GATT's Include declarations); set before
    /// ``PeripheralManager/add(_:)``.
    ///
    /// Core Bluetooth's type: the array holds ``MutableService``s; others are not published.
    /// BlueZ resolves an included service only inside the GATT application that includes it
    /// (the `Includes` property of `org.bluez.GattService1`), so the application registered for
    /// this service also carries every service it includes, directly or not, each once and
    /// before the services that include it. An included service you also added on its own moves
    /// into that application while this service is published (see
    /// <doc:CoreBluetoothDifferences>). A service that includes itself through a cycle is refused:
    /// `didAdd` reports ``BluetoothError/Code/invalidParameters``.
    public override var includedServices: [Service]? {
        get { super.includedServices }
        set { setIncludedServices(newValue) }
    }

    /// The characteristics that are published: the ``MutableCharacteristic``s of ``characteristics``.
    var publishedCharacteristics: [MutableCharacteristic] {
        characteristics?.compactMap { $0 as? MutableCharacteristic } ?? []
    }

    /// The included services that are published: the ``MutableService``s of ``includedServices``.
    var publishedIncludedServices: [MutableService] {
        includedServices?.compactMap { $0 as? MutableService } ?? []
    }

    /// The UUID.
    public override var description: String { "MutableService(\(uuid))" }
}

/// A characteristic to publish, as Core Bluetooth's `CBMutableCharacteristic`: a
/// ``Characteristic`` subclass.
///
/// One created with a `value` is static: the library answers reads itself
/// and the value cannot change (Core Bluetooth's rule; it must be read-only).
/// One created with nil is dynamic: reads and writes reach the delegate.
/// The invariant behind `@unchecked Sendable`: mutable state sits behind a `PosixMutex`.
public final class MutableCharacteristic: Characteristic, @unchecked Sendable {
    /// What is published, settable until the service is added.
    private struct Published {
        var value: Data?
        var descriptors: [Descriptor]?
        var properties: CharacteristicProperties
        var permissions: AttributePermissions
    }

    private let state: PosixMutex<Published>
    private let subscribers = PosixMutex<[Central]>([])

    /// Creates a characteristic; a non-nil `value` makes it static (cached, read-only).
    public init(
        type: BluetoothUUID, properties: CharacteristicProperties, value: Data?, permissions: AttributePermissions
    ) {
        self.state = PosixMutex(Published(value: value, properties: properties, permissions: permissions))
        super.init(uuid: type, properties: properties, service: nil, id: .local)
    }

    /// What centrals may do; settable, as Core Bluetooth's, until the service is added (a change
    /// takes effect when it is added again).
    public override var properties: CharacteristicProperties {
        get { state.withLock { $0.properties } }
        set { state.withLock { $0.properties = newValue } }
    }

    /// Who may read and write the value; settable until the service is added, as ``properties``.
    public var permissions: AttributePermissions {
        get { state.withLock { $0.permissions } }
        set { state.withLock { $0.permissions = newValue } }
    }

    /// The static value given at creation; nil for a dynamic characteristic (whose reads reach
    /// the delegate and whose updates go out with ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)``).
    public override var value: Data? {
        get { state.withLock { $0.value } }
        set { state.withLock { $0.value = newValue } }
    }

    /// The descriptors to publish with it.
    ///
    /// Core Bluetooth's type: the array holds ``MutableDescriptor``s; others are not published.
    public override var descriptors: [Descriptor]? {
        get { state.withLock { $0.descriptors } }
        set { state.withLock { $0.descriptors = newValue } }
    }

    /// The descriptors that are published: the ``MutableDescriptor``s of ``descriptors``.
    var publishedDescriptors: [MutableDescriptor] {
        descriptors?.compactMap { $0 as? MutableDescriptor } ?? []
    }

    /// The centrals subscribed to this characteristic's notifications or indications,
    /// as the peripheral manager last reported them with `didSubscribeTo` / `didUnsubscribeFrom`.
    public var subscribedCentrals: [Central]? { subscribers.withLock { $0 } }

    func setSubscribedCentrals(_ centrals: [Central]) { subscribers.withLock { $0 = centrals } }

    /// The UUID and properties.
    public override var description: String { "MutableCharacteristic(\(uuid), \(properties.names))" }
}

/// A descriptor to publish, with a static value, as Core Bluetooth's `CBMutableDescriptor`: a
/// ``Descriptor`` subclass.
///
/// The invariant behind `@unchecked Sendable` (restated from ``Descriptor``, as Swift requires of
/// a subclass): its own state is one immutable `let`.
public final class MutableDescriptor: Descriptor, @unchecked Sendable {
    /// The bytes published.
    let bytes: Data

    /// Creates a descriptor with a static value.
    public init(type: BluetoothUUID, value: Data) {
        self.bytes = value
        super.init(uuid: type, characteristic: nil, id: .local)
    }

    /// The bytes published, never nil; ``Descriptor/value`` decodes them as Core Bluetooth does.
    public override var data: Data? { bytes }

    /// The UUID.
    public override var description: String { "MutableDescriptor(\(uuid))" }
}
