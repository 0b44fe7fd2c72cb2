import Foundation

/// What a peripheral manager with a restore identifier saves on every change: its published
/// services and characteristics (with static values, descriptors and subscribed centrals) and
/// what it advertises.
///
/// The subscribed centrals come back as they were when the process ended (Core Bluetooth's
/// restored `subscribedCentrals`), but bluetoothd 5.66 ends every subscription to an
/// application when the process that registered it goes away (`gatt_db_service_removed`
/// clears each device's Client Characteristic Configuration of the removed services), so the
/// restored manager reports them unsubscribed once it knows its state; centrals subscribe
/// again, and `didSubscribeTo` reports them.
struct PeripheralRestorationRecord: RestorationRecord {
    struct Descriptor: Codable, Hashable, Sendable {
        var uuid: String
        var value: Data
    }

    /// A central subscribed to a characteristic when the state was saved.
    struct SubscribedCentral: Codable, Hashable, Sendable {
        var identifier: UUID
        var maximumUpdateValueLength: Int
    }

    struct Characteristic: Codable, Hashable, Sendable {
        var uuid: String
        var properties: UInt
        var permissions: UInt
        /// The static value; nil for a dynamic characteristic.
        var value: Data?
        var descriptors: [Descriptor]
        /// The centrals subscribed to it; nil for none (and in records saved before they were kept).
        var subscribedCentrals: [SubscribedCentral]? = nil
    }

    struct Service: Codable, Hashable, Sendable {
        var uuid: String
        var isPrimary: Bool
        var characteristics: [Characteristic]
        /// The services it includes, as indices into the record's `services`; nil for none
        /// (and in records saved before included services existed).
        var includes: [Int]? = nil
        /// False for a service saved only because an added service includes it; nil means added.
        var isAdded: Bool? = nil
    }

    var services: [Service] = []
    var advertisement: AdvertisementData?

    var isEmpty: Bool { services.isEmpty && advertisement == nil }
}

extension PeripheralRestorationRecord.Service {
    /// The record of a published service (the values of static characteristics included).
    init(_ service: MutableService) {
        uuid = service.uuid.uuidString
        isPrimary = service.isPrimary
        characteristics = service.publishedCharacteristics.map { characteristic in
            PeripheralRestorationRecord.Characteristic(
                uuid: characteristic.uuid.uuidString, properties: characteristic.properties.rawValue,
                permissions: characteristic.permissions.rawValue,
                value: characteristic.value,
                descriptors: characteristic.publishedDescriptors.map {
                    PeripheralRestorationRecord.Descriptor(uuid: $0.uuid.uuidString, value: $0.bytes)
                },
                subscribedCentrals: characteristic.subscribedCentrals.flatMap { centrals in
                    centrals.isEmpty
                        ? nil
                        : centrals.map {
                            PeripheralRestorationRecord.SubscribedCentral(
                                identifier: $0.identifier, maximumUpdateValueLength: $0.maximumUpdateValueLength)
                        }
                })
        }
    }

    /// The service object again; nil when a UUID no longer parses.
    var mutableService: MutableService? {
        guard let type = BluetoothUUID(parsing: uuid) else { return nil }
        let service = MutableService(type: type, primary: isPrimary)
        service.characteristics = characteristics.compactMap { saved in
            guard let type = BluetoothUUID(parsing: saved.uuid) else { return nil }
            let characteristic = MutableCharacteristic(
                type: type, properties: CharacteristicProperties(rawValue: saved.properties), value: saved.value,
                permissions: AttributePermissions(rawValue: saved.permissions))
            characteristic.descriptors = saved.descriptors.compactMap { descriptor in
                BluetoothUUID(parsing: descriptor.uuid).map { MutableDescriptor(type: $0, value: descriptor.value) }
            }
            if let centrals = saved.subscribedCentrals, !centrals.isEmpty {
                // Lengths from a hostile file are kept within what a Central can report.
                characteristic.setSubscribedCentrals(
                    centrals.map {
                        Central(
                            identifier: $0.identifier,
                            maximumUpdateValueLength: min(max($0.maximumUpdateValueLength, 20), 514))
                    })
            }
            return characteristic
        }
        return service
    }
}
