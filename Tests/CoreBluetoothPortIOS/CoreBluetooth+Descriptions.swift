import BlueZKit

// Core Bluetooth's enumerations have no description of their own (a state prints as
// "CBManagerState(rawValue: 5)" on iOS), so apps write one.

extension CBManagerState: CustomStringConvertible {
    public var description: String {
        switch self {
        case .unknown: return "Unknown"
        case .resetting: return "Resetting"
        case .unsupported: return "Unsupported"
        case .unauthorized: return "Unauthorized"
        case .poweredOff: return "Off"
        case .poweredOn: return "On"
        @unknown default: return "New state"
        }
    }
}

extension CBCharacteristicProperties: CustomStringConvertible {
    public var description: String {
        var names: [String] = []
        if contains(.broadcast) { names.append("broadcast") }
        if contains(.read) { names.append("read") }
        if contains(.writeWithoutResponse) { names.append("write without response") }
        if contains(.write) { names.append("write") }
        if contains(.notify) { names.append("notify") }
        if contains(.indicate) { names.append("indicate") }
        if contains(.authenticatedSignedWrites) { names.append("signed writes") }
        if contains(.extendedProperties) { names.append("extended properties") }
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}
