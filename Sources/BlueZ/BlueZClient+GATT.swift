import DBus

/// The remote GATT database of a connected device, and the calls on it.
///
/// BlueZ resolves the whole database once per connection (`ServicesResolved`)
/// and exports it as `GattService1` / `GattCharacteristic1` /
/// `GattDescriptor1` objects under the device; this reads them from the cache.
extension BlueZClient {
    /// An opaque handle on one remote service, characteristic or descriptor.
    package struct AttributeID: Hashable, Sendable {
        let path: ObjectPath

        /// A string that names the attribute across processes (for saved state), as long as the
        /// device's GATT database does not change: BlueZ derives the object path from handles.
        package var token: String { path.rawValue }

        /// The attribute a saved ``token`` names; nil when the text cannot be one.
        package init?(token: String) {
            guard let path = try? ObjectPath(token), path.rawValue.contains("/dev_") else { return nil }
            self.path = path
        }

        init(path: ObjectPath) { self.path = path }

        /// The handle of a local attribute (one published by a peripheral manager): the root
        /// path, which no remote attribute has, so no call on a remote device ever matches it.
        package static let local = AttributeID(path: .root)

        /// Whether this attribute is one of `device`'s (its object lies under the device's).
        package func belongs(to device: DeviceID) -> Bool { path.isDescendant(of: device.path) }

        /// The device whose object this attribute's lies under; nil for none.
        package var device: DeviceID? { DeviceID(containing: path) }
    }

    package struct ServiceInfo: Sendable, Hashable {
        package let id: AttributeID
        package let uuid: String
        package let isPrimary: Bool
        package let includes: [AttributeID]
    }

    package struct CharacteristicInfo: Sendable, Hashable {
        package let id: AttributeID
        package let service: AttributeID
        package let uuid: String
        /// What bluetoothd reports the characteristic declares.
        package let flags: BlueZGattFlags
        package let value: [UInt8]?
        package let isNotifying: Bool
        /// The ATT MTU BlueZ negotiated, when it says (BlueZ 5.62+).
        package let mtu: UInt16?
        /// bluetoothd offers `AcquireNotify` (it has the `NotifyAcquired` property: notify characteristics).
        package let offersAcquireNotify: Bool
        /// bluetoothd offers `AcquireWrite` (it has `WriteAcquired`: write-without-response characteristics).
        package let offersAcquireWrite: Bool
    }

    package struct DescriptorInfo: Sendable, Hashable {
        package let id: AttributeID
        package let characteristic: AttributeID
        package let uuid: String
        package let value: [UInt8]?
    }

    /// The device's resolved GATT database, in handle order (on the queue).
    ///
    /// A service bluetoothd calls secondary that no service includes is given as primary:
    /// bluetoothd's discovery stores a primary service whose handles overlap a cached one as
    /// secondary (`discovery_parse_services` in src/shared/gatt-client.c re-inserts it with
    /// `primary` false, every version since 2017, seen on 5.66, 5.82 and 5.87 after a
    /// peripheral's handles moved), while a real secondary service is reachable only through an
    /// include (Core 5.4, Vol 3, Part G, 3.1).
    package func gattDatabase(of device: DeviceID) -> (
        services: [ServiceInfo], characteristics: [CharacteristicInfo], descriptors: [DescriptorInfo]
    ) {
        var services: [ServiceInfo] = []
        var characteristics: [CharacteristicInfo] = []
        var descriptors: [DescriptorInfo] = []
        for path in cache.objects.keys.sorted() where path != device.path && path.isDescendant(of: device.path) {
            let interfaces = cache.objects[path] ?? [:]
            if let p = interfaces[BlueZNames.gattService.rawValue], let uuid = p["UUID"]?.stringValue {
                services.append(
                    ServiceInfo(
                        id: AttributeID(path: path), uuid: uuid, isPrimary: p["Primary"]?.boolValue ?? true,
                        includes: (p["Includes"]?.arrayValue ?? []).compactMap { $0.objectPathValue }.map(
                            AttributeID.init)))
            }
            if let info = Self.characteristicInfo(path, interfaces) { characteristics.append(info) }
            if let p = interfaces[BlueZNames.gattDescriptor.rawValue], let uuid = p["UUID"]?.stringValue,
                let characteristic = p["Characteristic"]?.objectPathValue
            {
                descriptors.append(
                    DescriptorInfo(
                        id: AttributeID(path: path), characteristic: AttributeID(path: characteristic), uuid: uuid,
                        value: p["Value"]?.bytesValue))
            }
        }
        let included = Set(services.flatMap(\.includes))
        services = services.map { service in
            guard !service.isPrimary, !included.contains(service.id) else { return service }
            return ServiceInfo(id: service.id, uuid: service.uuid, isPrimary: true, includes: service.includes)
        }
        return (services, characteristics, descriptors)
    }

    /// What the cache holds of one characteristic (on the queue); nil when it is gone.
    package func characteristic(_ id: AttributeID) -> CharacteristicInfo? {
        cache.objects[id.path].flatMap { Self.characteristicInfo(id.path, $0) }
    }

    private static func characteristicInfo(_ path: ObjectPath, _ interfaces: [String: [String: DBusValue]])
        -> CharacteristicInfo?
    {
        guard let p = interfaces[BlueZNames.gattCharacteristic.rawValue], let uuid = p["UUID"]?.stringValue,
            let service = p["Service"]?.objectPathValue
        else { return nil }
        return CharacteristicInfo(
            id: AttributeID(path: path), service: AttributeID(path: service), uuid: uuid,
            flags: BlueZGattFlags(names: p["Flags"]?.stringArrayValue ?? []), value: p["Value"]?.bytesValue,
            isNotifying: p["Notifying"]?.boolValue ?? false, mtu: p["MTU"]?.uint16Value,
            offersAcquireNotify: p["NotifyAcquired"] != nil, offersAcquireWrite: p["WriteAcquired"] != nil)
    }

    /// A round trip to bluetoothd about `device`: everything bluetoothd queued
    /// before it answers (its `InterfacesAdded` for GATT objects may follow
    /// `ServicesResolved=true`) has been applied to the cache once this returns.
    package func synchronize(with device: DeviceID) async {
        _ = try? await connection.call(
            destination: BlueZNames.service, path: device.path, interface: .properties, member: "Get",
            arguments: [.string(BlueZNames.device.rawValue), .string("ServicesResolved")])
    }

    /// `ReadValue({offset})` on a characteristic or descriptor; tried again while the peripheral
    /// answers Database Out Of Sync.
    package func readValue(_ id: AttributeID, descriptor: Bool, offset: UInt16 = 0) async throws(BlueZError) -> [UInt8]
    {
        try await BlueZError.converting { () async throws(DBusError) -> [UInt8] in
            let options: [String: DBusValue] = offset == 0 ? [:] : ["offset": .uint16(offset)]
            let reply = try await retryingOutOfSync { () async throws(DBusError) in
                try await connection.call(
                    destination: BlueZNames.service, path: id.path,
                    interface: descriptor ? BlueZNames.gattDescriptor : BlueZNames.gattCharacteristic,
                    member: "ReadValue", arguments: [.stringVariantDictionary(options)])
            }
            guard let bytes = reply.first?.bytesValue else {
                throw DBusError(
                    .invalidArgs, "ReadValue answered '\(reply.map(\.signature.rawValue).joined())', not 'ay'")
            }
            return bytes
        }
    }

    /// `StartNotify` / `StopNotify`; values then arrive as `PropertiesChanged` on `Value`.
    /// `StartNotify` is tried again while the peripheral answers Database Out Of Sync (bluetoothd
    /// ends the session it began before it replies with that error).
    package func setNotify(_ id: AttributeID, enabled: Bool) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await retryingOutOfSync { () async throws(DBusError) in
                try await connection.call(
                    destination: BlueZNames.service, path: id.path, interface: BlueZNames.gattCharacteristic,
                    member: enabled ? "StartNotify" : "StopNotify")
            }
        }
    }
}
