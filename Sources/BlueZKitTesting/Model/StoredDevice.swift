/// A bonded device as bluetoothd stores it, reloaded when bluetoothd or the adapter comes back.
struct StoredDevice: Sendable {
    let address: String
    let addressType: SimulatedAddressType
    var name: String?
    var alias: String?
    var trusted: Bool
    var blocked: Bool
    var gattUUIDs: [String]
}
