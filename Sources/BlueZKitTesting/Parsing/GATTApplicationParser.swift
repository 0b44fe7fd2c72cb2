internal import DBus

/// Builds a ``SimulatedGATTApplication`` from the reply to `GetManagedObjects`, validating it as
/// bluetoothd 5.66 does in `client_ready_cb` (`src/gatt-database.c`).
enum GATTApplicationParser {
    static let serviceInterface = "org.bluez.GattService1"
    static let characteristicInterface = "org.bluez.GattCharacteristic1"
    static let descriptorInterface = "org.bluez.GattDescriptor1"
    static let profileInterface = "org.bluez.GattProfile1"
    /// The flags `parse_desc_flags` accepts.
    static let descriptorFlags: Set<String> = [
        "read", "write", "encrypt-read", "encrypt-write", "encrypt-authenticated-read", "encrypt-authenticated-write",
        "secure-read", "secure-write", "authorize",
    ]
    /// GAP and GATT: bluetoothd serves them itself and rejects an application's.
    static let reservedUUIDs: Set<String> = [BluetoothText.uuid("1800") ?? "", BluetoothText.uuid("1801") ?? ""]

    /// The application, or the `Failed` error bluetoothd replies with.
    static func parse(_ reply: DBusValue?, owner: String, root: ObjectPath) -> Result<
        SimulatedGATTApplication, DBusError
    > {
        var objects: [(ObjectPath, [String: [String: DBusValue]])] = []
        for entry in reply?.dictionaryEntries ?? [] {
            guard let path = entry.key.objectPathValue, path == root || path.isDescendant(of: root) else { continue }
            var interfaces: [String: [String: DBusValue]] = [:]
            for item in entry.value.dictionaryEntries ?? [] {
                guard let name = item.key.stringValue, !name.hasPrefix("org.freedesktop.DBus.") else { continue }
                interfaces[name] = item.value.stringKeyedDictionary ?? [:]
            }
            if !interfaces.isEmpty { objects.append((path, interfaces)) }
        }
        // bluetoothd inserts services in the order of the reply (`parse_managed_objects`, then
        // `register_service` over the proxies in that order), which decides which includes resolve.
        let replyOrder = Dictionary(
            objects.enumerated().map { ($0.element.0.rawValue, $0.offset) }, uniquingKeysWith: { first, _ in first })
        objects.sort { $0.0 < $1.0 }
        guard !objects.isEmpty else { return .failure(BlueZErrors.failed("No object received")) }
        // `register_service` and friends check the structure; `database_add_app` then parses UUIDs and
        // `Primary`, and fails with its own message.
        let invalid = BlueZErrors.failed("No valid service object found")
        var unparsable = false
        var services: [SimulatedGATTApplication.Service] = []
        var includePaths: [String: [String]] = [:]
        for (path, interfaces) in objects {
            guard let properties = interfaces[serviceInterface] else { continue }
            let uuid = uuid(properties)
            let primary = properties["Primary"]?.boolValue
            let includes = includes(properties)
            if uuid == nil || primary == nil || includes == nil { unparsable = true }
            includePaths[path.rawValue] = includes ?? []
            services.append(
                .init(
                    path: path.rawValue, uuid: uuid ?? "", isPrimary: primary ?? false, characteristics: [],
                    includes: []))
        }
        // `include_services`: an include resolves only to a service of this application that was
        // inserted already (the including service itself counts: it is inserted before its
        // includes are added); anything else is logged ("include service not found") and skipped.
        let servicePaths = Set(services.map(\.path))
        for index in services.indices {
            let position = replyOrder[services[index].path] ?? 0
            let resolved = (includePaths[services[index].path] ?? []).filter { included in
                guard servicePaths.contains(included), let target = replyOrder[included] else { return false }
                return target <= position
            }
            services[index].includes = resolved
        }
        for (path, interfaces) in objects {
            guard let properties = interfaces[characteristicInterface] else { continue }
            guard let service = properties["Service"]?.objectPathValue?.rawValue,
                let index = services.firstIndex(where: { $0.path == service }),
                let flags = properties["Flags"]?.stringArrayValue, case .success = AttributeFlags.parse(flags)
            else { return .failure(invalid) }
            let uuid = uuid(properties)
            if uuid == nil { unparsable = true }
            var characteristic = SimulatedGATTApplication.Characteristic(
                path: path.rawValue, uuid: uuid ?? "", flags: flags, descriptors: [])
            // `g_dbus_proxy_get_property(chrc->proxy, "NotifyAcquired", …)` in `ccc_write_cb`.
            characteristic.offersAcquireNotify = properties["NotifyAcquired"] != nil
            services[index].characteristics.append(characteristic)
        }
        for (path, interfaces) in objects {
            guard let properties = interfaces[descriptorInterface] else { continue }
            guard let owner = properties["Characteristic"]?.objectPathValue?.rawValue,
                let flags = properties["Flags"]?.stringArrayValue, flags.allSatisfy(descriptorFlags.contains),
                let serviceIndex = services.firstIndex(where: { $0.characteristics.contains { $0.path == owner } }),
                let index = services[serviceIndex].characteristics.firstIndex(where: { $0.path == owner })
            else { return .failure(invalid) }
            let uuid = uuid(properties)
            if uuid == nil { unparsable = true }
            services[serviceIndex].characteristics[index].descriptors.append(
                .init(path: path.rawValue, uuid: uuid ?? "", flags: flags))
        }
        let profiles = objects.contains { $0.1[profileInterface] != nil }
        guard !services.isEmpty || profiles else { return .failure(invalid) }
        guard !unparsable else { return .failure(BlueZErrors.failed("Failed to create entry in database")) }
        return .success(SimulatedGATTApplication(owner: owner, path: root.rawValue, services: services))
    }

    /// `parse_includes`: no `Includes` is no includes; anything but an array of object paths is
    /// an error (nil).
    private static func includes(_ properties: [String: DBusValue]) -> [String]? {
        guard let value = properties["Includes"]?.unwrappingVariants else { return [] }
        guard case .array(_, let elements) = value else { return nil }
        var paths: [String] = []
        for element in elements {
            guard let path = element.objectPathValue else { return nil }
            paths.append(path.rawValue)
        }
        return paths
    }

    /// `parse_uuid`: a valid UUID string that is not GAP or GATT.
    private static func uuid(_ properties: [String: DBusValue]) -> String? {
        guard case .string(let text)? = properties["UUID"]?.unwrappingVariants, let uuid = BluetoothText.uuid(text),
            !reservedUUIDs.contains(uuid)
        else { return nil }
        return uuid
    }
}
