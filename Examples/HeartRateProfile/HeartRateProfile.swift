public import BlueZKit

/// The Bluetooth SIG assigned numbers the heart-rate examples use.
public enum HeartRateProfile {
    /// Heart Rate service.
    public static let service = BluetoothUUID(0x180D)
    /// Heart Rate Measurement (notify).
    public static let measurement = BluetoothUUID(0x2A37)
    /// Body Sensor Location (read).
    public static let bodySensorLocation = BluetoothUUID(0x2A38)
    /// Heart Rate Control Point (write).
    public static let controlPoint = BluetoothUUID(0x2A39)
    /// Device Information service, with its Manufacturer Name and Model Number strings.
    public static let deviceInformation = BluetoothUUID(0x180A)
    /// Manufacturer Name String.
    public static let manufacturerName = BluetoothUUID(0x2A29)
    /// Model Number String.
    public static let modelNumber = BluetoothUUID(0x2A24)
    /// Battery service.
    public static let battery = BluetoothUUID(0x180F)
    /// Battery Level (read, notify), percent.
    public static let batteryLevel = BluetoothUUID(0x2A19)

    /// Control point command: reset Energy Expended.
    public static let resetEnergyExpended: UInt8 = 0x01
    /// The ATT error for an unsupported control point value ("Control Point Not Supported").
    public static let controlPointNotSupported: UInt8 = 0x80

    /// The names of Body Sensor Location values (0 other … 6 foot).
    public static func bodySensorLocationName(_ value: UInt8) -> String {
        let names = ["other", "chest", "wrist", "finger", "hand", "ear lobe", "foot"]
        return Int(value) < names.count ? names[Int(value)] : "reserved (\(value))"
    }
}
