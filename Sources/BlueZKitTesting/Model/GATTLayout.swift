/// A simulated peripheral's GATT database with ATT handles assigned, as a GATT server lays it out.
///
/// With the standard services, handle `0x0001` holds the GAP service
/// (`1800`, Device Name and Appearance) and `0x0006` the GATT service
/// (`1801`, Service Changed with its CCCD); the peripheral's own services
/// follow from `0x000a`. Each service is its declaration, its include
/// declarations, then per characteristic its declaration, value and
/// descriptors (an added CCCD right after the value).
struct GATTLayout: Sendable {
    enum DescriptorKind: Sendable {
        case user, clientConfiguration, extendedProperties
    }

    struct Descriptor: Sendable {
        let object: SimulatedDescriptor
        let uuid: String
        let handle: UInt16
        let kind: DescriptorKind
        let flags: AttributeFlags

        /// The object-path element bluetoothd gives it: `descZZZZ`.
        var pathElement: String { "desc" + BluetoothText.handle(handle) }
    }

    struct Characteristic: Sendable {
        let object: SimulatedCharacteristic
        let uuid: String
        let handle: UInt16
        let valueHandle: UInt16
        let flags: AttributeFlags
        let descriptors: [Descriptor]

        /// The object-path element bluetoothd gives it: `charYYYY`, after its declaration's handle.
        var pathElement: String { "char" + BluetoothText.handle(handle) }
    }

    struct Service: Sendable {
        let object: SimulatedService
        let uuid: String
        let handle: UInt16
        let endHandle: UInt16
        let isPrimary: Bool
        let includes: [UInt16]
        let characteristics: [Characteristic]
        /// Claimed by a bluetoothd plugin (the GAP service): not exported on D-Bus before 5.80, and
        /// read-only from then (`SimulatorCore.isExported(_:)`).
        let isHidden: Bool
        /// The GAP or GATT service the layout adds itself.
        let isStandard: Bool

        /// The object-path element bluetoothd gives it: `serviceXXXX`, after its start handle.
        var pathElement: String { "service" + BluetoothText.handle(handle) }
    }

    let services: [Service]

    static let clientConfigurationUUID = "00002902" + BluetoothText.baseSuffix
    static let extendedPropertiesUUID = "00002900" + BluetoothText.baseSuffix

    /// Lays out `services` (after the standard ones when `standard`); throws on an invalid UUID, flag or include.
    ///
    /// With a `previous` layout (the database changing), a service that was in it keeps its start handle
    /// when the services before it leave room, as a server keeps unaffected services where they are; a
    /// new service starts right after the one before it.
    static func make(
        services: [SimulatedService], standard: Bool, deviceName: String?, previous: GATTLayout? = nil
    ) throws(SimulatedBlueZError) -> GATTLayout {
        var previousStarts: [ObjectIdentifier: UInt16] = [:]
        for service in previous?.services ?? [] where !service.isStandard {
            previousStarts[ObjectIdentifier(service.object)] = service.handle
        }
        var all: [(SimulatedService, Bool)] = []
        if standard {
            let gap = SimulatedService(
                uuid: "1800",
                characteristics: [
                    SimulatedCharacteristic(uuid: "2A00", flags: ["read"], value: Array((deviceName ?? "").utf8)),
                    SimulatedCharacteristic(uuid: "2A01", flags: ["read"], value: [0, 0]),
                ])
            let gatt = SimulatedService(
                uuid: "1801", characteristics: [SimulatedCharacteristic(uuid: "2A05", flags: ["indicate"])])
            all = [(gap, true), (gatt, false)]
        }
        all += services.map { ($0, false) }
        // Pass 1: where each service starts.
        var starts: [ObjectIdentifier: UInt16] = [:]
        var next: Int = 1
        for (service, _) in all {
            next = max(next, Int(previousStarts[ObjectIdentifier(service)] ?? 0))
            starts[ObjectIdentifier(service)] = UInt16(clamping: next)
            next += 1 + service.includes.count
            for characteristic in service.characteristics {
                next += 2 + (try descriptorPlan(for: characteristic)).count
            }
            guard next <= 0xFFFF else {
                throw SimulatedBlueZError(.invalidConfiguration, "GATT database exceeds 0xFFFF handles")
            }
        }
        // Pass 2: the layout.
        var laidOut: [Service] = []
        for (index, (service, hidden)) in all.enumerated() {
            let start = starts[ObjectIdentifier(service)]!
            var handle = start
            let includes = try service.includes.map { (included) throws(SimulatedBlueZError) -> UInt16 in
                guard let target = starts[ObjectIdentifier(included)] else {
                    throw SimulatedBlueZError(
                        .invalidConfiguration, "service \(service.uuid) includes a service of another peripheral")
                }
                handle += 1
                return target
            }
            var characteristics: [Characteristic] = []
            for characteristic in service.characteristics {
                let declaration = handle + 1
                handle += 2
                var descriptors: [Descriptor] = []
                for (descriptor, kind) in try descriptorPlan(for: characteristic) {
                    handle += 1
                    descriptors.append(
                        Descriptor(
                            object: descriptor, uuid: try uuid(descriptor.uuid), handle: handle, kind: kind,
                            flags: try flags(descriptor.flags)))
                }
                characteristics.append(
                    Characteristic(
                        object: characteristic, uuid: try uuid(characteristic.uuid), handle: declaration,
                        valueHandle: declaration + 1, flags: try flags(characteristic.flags), descriptors: descriptors))
            }
            laidOut.append(
                Service(
                    object: service, uuid: try uuid(service.uuid), handle: start, endHandle: handle,
                    isPrimary: service.isPrimary, includes: includes, characteristics: characteristics,
                    isHidden: hidden, isStandard: standard && index < 2))
        }
        return GATTLayout(services: laidOut)
    }

    /// The descriptors a characteristic gets, in handle order: an added CCCD and Extended Properties first.
    private static func descriptorPlan(for characteristic: SimulatedCharacteristic) throws(SimulatedBlueZError)
        -> [(SimulatedDescriptor, DescriptorKind)]
    {
        let parsed = try flags(characteristic.flags)
        var plan: [(SimulatedDescriptor, DescriptorKind)] = []
        var userUUIDs: [String] = []
        for descriptor in characteristic.descriptors { userUUIDs.append(try uuid(descriptor.uuid)) }
        if parsed.canNotify && !userUUIDs.contains(clientConfigurationUUID) {
            plan.append(
                (SimulatedDescriptor(uuid: "2902", flags: ["read", "write"], value: [0, 0]), .clientConfiguration))
        }
        if parsed.properties & AttributeFlags.extended != 0 && !userUUIDs.contains(extendedPropertiesUUID) {
            plan.append(
                (SimulatedDescriptor(uuid: "2900", value: [parsed.extendedProperties, 0]), .extendedProperties))
        }
        for (descriptor, descriptorUUID) in zip(characteristic.descriptors, userUUIDs) {
            plan.append((descriptor, descriptorUUID == clientConfigurationUUID ? .clientConfiguration : .user))
        }
        return plan
    }

    private static func uuid(_ text: String) throws(SimulatedBlueZError) -> String {
        guard let uuid = BluetoothText.uuid(text) else {
            throw SimulatedBlueZError(.invalidConfiguration, "invalid UUID '\(text)'")
        }
        return uuid
    }

    private static func flags(_ flags: [String]) throws(SimulatedBlueZError) -> AttributeFlags {
        switch AttributeFlags.parse(flags) {
        case .success(let parsed): return parsed
        case .failure(let unknown): throw SimulatedBlueZError(.invalidConfiguration, "unknown flag '\(unknown.flag)'")
        }
    }

    /// The UUIDs of the primary services (what bluetoothd puts in `Device1.UUIDs` once services are resolved).
    var primaryUUIDs: [String] {
        var seen: [String] = []
        for service in services where service.isPrimary && !seen.contains(service.uuid) { seen.append(service.uuid) }
        return seen
    }
}
