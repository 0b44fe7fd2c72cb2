internal import DBus

/// One exported remote GATT object: `GattService1`, `GattCharacteristic1` or `GattDescriptor1`.
enum GATTNode: Sendable {
    struct Service: Sendable {
        let path: ObjectPath
        let device: ObjectPath
        let uuid: String
        let isPrimary: Bool
        var includes: [ObjectPath]
    }

    struct Characteristic: Sendable {
        let path: ObjectPath
        let service: ObjectPath
        let device: ObjectPath
        let uuid: String
        let valueHandle: UInt16
        let flags: AttributeFlags
        let object: SimulatedCharacteristic
        /// bluetoothd's cached value: updated by reads and notifications, not by writes.
        var cachedValue: [UInt8] = []
        /// Clients (unique bus names) with a notify session (`notify_clients`): each `StartNotify`
        /// caller, and the `AcquireNotify` caller while its socket holds the registration.
        var notifyClients: [String] = []
        var notifying = false
        /// The socket `AcquireWrite` handed out or is about to (`write_io`).
        var writeIO: AcquiredSocket?
        /// The socket `AcquireNotify` handed out or is about to (`notify_io`).
        var notifyIO: AcquiredSocket?
    }

    struct Descriptor: Sendable {
        let path: ObjectPath
        let characteristic: ObjectPath
        let device: ObjectPath
        let uuid: String
        let kind: GATTLayout.DescriptorKind
        let flags: AttributeFlags
        let object: SimulatedDescriptor
        let characteristicValueHandle: UInt16
        var cachedValue: [UInt8] = []
    }

    case service(Service)
    case characteristic(Characteristic)
    case descriptor(Descriptor)

    var device: ObjectPath {
        switch self {
        case .service(let node): return node.device
        case .characteristic(let node): return node.device
        case .descriptor(let node): return node.device
        }
    }

    var interface: String {
        switch self {
        case .service: return "org.bluez.GattService1"
        case .characteristic: return "org.bluez.GattCharacteristic1"
        case .descriptor: return "org.bluez.GattDescriptor1"
        }
    }
}
