import Foundation

/// What a peripheral manager with a restore identifier saves on every change: its published
/// services and characteristics (with static values and descriptors) and what it advertises.
///
/// Subscribed centrals are not saved: bluetoothd ends every subscription to an application
/// when the process that registered it goes away, so a restored manager starts without any
/// (centrals subscribe again, and `didSubscribeTo` reports them).
struct PeripheralRestorationRecord: RestorationRecord {
    struct Descriptor: Codable, Hashable, Sendable {
        var uuid: String
        var value: Data
    }

    struct Characteristic: Codable, Hashable, Sendable {
        var uuid: String
        var properties: UInt
        var permissions: UInt
        /// The static value; nil for a dynamic characteristic.
        var value: Data?
        var descriptors: [Descriptor]
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
        characteristics = (service.characteristics ?? []).map { characteristic in
            PeripheralRestorationRecord.Characteristic(
                uuid: characteristic.uuid.uuidString, properties: characteristic.properties.rawValue,
                permissions: characteristic.permissions.rawValue,
                value: characteristic.value,
                descriptors: (characteristic.descriptors ?? []).map {
                    PeripheralRestorationRecord.Descriptor(uuid: $0.uuid.uuidString, value: $0.value)
                })
        }
    }

    /// The service object again; nil when a UUID no longer parses.
    var mutableService: MutableService? {
        guard let type = BluetoothUUID(string: uuid) else { return nil }
        let service = MutableService(type: type, primary: isPrimary)
        service.characteristics = characteristics.compactMap { saved in
            guard let type = BluetoothUUID(string: saved.uuid) else { return nil }
            let characteristic = MutableCharacteristic(
                type: type, properties: CharacteristicProperties(rawValue: saved.properties), value: saved.value,
                permissions: AttributePermissions(rawValue: saved.permissions))
            characteristic.descriptors = saved.descriptors.compactMap { descriptor in
                BluetoothUUID(string: descriptor.uuid).map { MutableDescriptor(type: $0, value: descriptor.value) }
            }
            return characteristic
        }
        return service
    }
}
