/// A service in a simulated peripheral's GATT database.
///
/// bluetoothd shows it as `org.bluez.GattService1` at `…/serviceXXXX`, where
/// `XXXX` is the handle of its declaration. A service belongs to one peripheral.
public final class SimulatedService: Sendable {
    /// The UUID as given (16-, 32- or 128-bit form).
    public let uuid: String
    /// Primary or secondary.
    public let isPrimary: Bool
    /// The characteristics, in handle order.
    public let characteristics: [SimulatedCharacteristic]
    /// Services this one includes (they must belong to the same peripheral).
    public let includes: [SimulatedService]
    let link = AttributeLink()

    /// A service with its characteristics and included services.
    public init(
        uuid: String, isPrimary: Bool = true, characteristics: [SimulatedCharacteristic] = [],
        includes: [SimulatedService] = []
    ) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
        self.includes = includes
    }

    /// Where bluetoothd exports this service, once its peripheral was added to an adapter.
    public var objectPath: String? { link.objectPath() }
}
