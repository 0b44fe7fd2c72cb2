import Foundation

extension MutableDescriptor {
    /// Creates a descriptor with a static value given as Core Bluetooth's `CBMutableDescriptor`
    /// takes it: a `String` (the Characteristic User Description, published as UTF-8), an
    /// `NSNumber` (published as 2 bytes, little-endian, as the Characteristic Extended Properties
    /// are), `Data` (the Characteristic Presentation Format, or any other bytes) or nil (empty).
    ///
    /// Core Bluetooth raises an exception for a value of another type; this initialiser traps,
    /// naming the type.
    public convenience init(type: BluetoothUUID, value: Any?) {
        let bytes: Data
        switch value {
        case nil: bytes = Data()
        case let data as Data: bytes = data
        case let text as String: bytes = Data(text.utf8)
        case let number as NSNumber:
            let raw = number.uint16Value
            bytes = Data([UInt8(truncatingIfNeeded: raw), UInt8(truncatingIfNeeded: raw >> 8)])
        case let other?:
            fatalError("CBMutableDescriptor(type:value:): a value of type \(Swift.type(of: other)) is not supported")
        }
        self.init(type: type, value: bytes)
    }
}
