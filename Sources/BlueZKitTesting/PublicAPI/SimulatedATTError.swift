/// An ATT error a simulated peripheral answers a read or write with.
///
/// Read and write handlers throw these; the simulated bluetoothd turns them
/// into the D-Bus errors bluetoothd 5.66 sends for a remote ATT error
/// (`create_gatt_dbus_error` in `src/gatt-client.c`): for example
/// ``readNotPermitted`` becomes `org.bluez.Error.NotPermitted` "Read not
/// permitted", ``invalidOffset`` becomes `org.bluez.Error.InvalidArguments`
/// "Invalid offset", and an application error `0x80`…`0x9f` becomes
/// `org.bluez.Error.Failed` "Operation failed with ATT error: 0x80".
public struct SimulatedATTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The ATT error code (Bluetooth Core, Vol 3, Part F, 3.4.1.1).
    public let code: UInt8

    /// An error with any ATT error code, such as an application error in `0x80`…`0x9f`.
    public init(code: UInt8) { self.code = code }

    /// `0x01` Invalid Handle.
    public static let invalidHandle = SimulatedATTError(code: 0x01)
    /// `0x02` Read Not Permitted.
    public static let readNotPermitted = SimulatedATTError(code: 0x02)
    /// `0x03` Write Not Permitted.
    public static let writeNotPermitted = SimulatedATTError(code: 0x03)
    /// `0x05` Insufficient Authentication.
    public static let insufficientAuthentication = SimulatedATTError(code: 0x05)
    /// `0x06` Request Not Supported.
    public static let requestNotSupported = SimulatedATTError(code: 0x06)
    /// `0x07` Invalid Offset.
    public static let invalidOffset = SimulatedATTError(code: 0x07)
    /// `0x08` Insufficient Authorization.
    public static let insufficientAuthorization = SimulatedATTError(code: 0x08)
    /// `0x0D` Invalid Attribute Value Length.
    public static let invalidAttributeValueLength = SimulatedATTError(code: 0x0D)
    /// `0x0E` Unlikely Error.
    public static let unlikelyError = SimulatedATTError(code: 0x0E)
    /// `0x0F` Insufficient Encryption.
    public static let insufficientEncryption = SimulatedATTError(code: 0x0F)

    /// The code in hex, as in `ATT error 0x02`.
    public var description: String {
        let digits = String(code, radix: 16)
        return "ATT error 0x" + (digits.count < 2 ? "0" : "") + digits
    }
}
