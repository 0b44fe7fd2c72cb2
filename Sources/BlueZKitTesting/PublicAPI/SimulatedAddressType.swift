/// The type of a Bluetooth LE address, as BlueZ's `AddressType` properties name it.
public enum SimulatedAddressType: String, Sendable, Hashable {
    /// A public (IEEE-assigned) address: `"public"`.
    case `public`
    /// A random (static or private) address: `"random"`.
    case random
}
