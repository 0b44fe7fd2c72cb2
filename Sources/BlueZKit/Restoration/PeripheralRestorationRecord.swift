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
    /// The advertisement's options (Linux); nil for none, and in records saved before they existed.
    var advertisingOptions: AdvertisingOptions? = nil

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

extension PeripheralRestorationRecord {
    /// The longest chain of included services a saved state may have (a service that includes one
    /// that includes another is a chain of 3). A file with a longer one is refused as unreadable:
    /// publishing walks the chains recursively, and a hostile file could make them as long as
    /// its thousands of services.
    static let maximumIncludeDepth = 16

    /// Decodes a record and checks its include chains (see ``maximumIncludeDepth``).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        services = try container.decode([Service].self, forKey: .services)
        advertisement = try container.decodeIfPresent(AdvertisementData.self, forKey: .advertisement)
        advertisingOptions = try container.decodeIfPresent(AdvertisingOptions.self, forKey: .advertisingOptions)
        let depth = Self.includeDepth(services.map { $0.includes ?? [] })
        guard depth <= Self.maximumIncludeDepth else {
            throw DecodingError.dataCorruptedError(
                forKey: .services, in: container,
                debugDescription: "included services nest \(depth) deep; at most \(Self.maximumIncludeDepth) are read")
        }
    }

    /// The longest chain of services through `includes` (indices; invalid ones and the edges
    /// that close a cycle are ignored, as the peripheral manager ignores them), without recursion.
    static func includeDepth(_ includes: [[Int]]) -> Int {
        let (acyclic, postOrder) = acyclicIncludes(includes)
        var depth = [Int](repeating: 0, count: includes.count)
        for node in postOrder { depth[node] = 1 + (acyclic[node].map { depth[$0] }.max() ?? 0) }
        return depth.max() ?? 0
    }

    /// `includes` without the indices out of range and the edges that close a cycle (found by a
    /// depth-first search from each service in turn, without recursion), and the services in
    /// an order where each comes after those it includes.
    static func acyclicIncludes(_ includes: [[Int]]) -> (includes: [[Int]], postOrder: [Int]) {
        var kept = [[Int]](repeating: [], count: includes.count)
        var postOrder: [Int] = []
        postOrder.reserveCapacity(includes.count)
        var state = [UInt8](repeating: 0, count: includes.count)  // 0 new, 1 on the path, 2 done
        for root in includes.indices where state[root] == 0 {
            var stack: [(node: Int, next: Int)] = [(root, 0)]
            state[root] = 1
            while let (node, next) = stack.last {
                if next < includes[node].count {
                    stack[stack.count - 1].next += 1
                    let child = includes[node][next]
                    // Out of range, or on the path: an edge that closes a cycle.
                    guard includes.indices.contains(child), state[child] != 1 else { continue }
                    kept[node].append(child)
                    if state[child] == 0 {
                        state[child] = 1
                        stack.append((child, 0))
                    }
                } else {
                    stack.removeLast()
                    state[node] = 2
                    postOrder.append(node)
                }
            }
        }
        return (kept, postOrder)
    }
}
