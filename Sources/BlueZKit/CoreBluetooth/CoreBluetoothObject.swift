import Foundation

// Core Bluetooth's classes are NSObject subclasses, and code written for them uses the NSObject
// API: `uuid.isEqual(otherUUID)`, `peripheral.isEqual(p)`, `hash`, and the object as a `%@`
// argument of `String(format:)` or `NSLog`. BlueZKit's types stay what they are (``BluetoothUUID``
// a value type, the rest Swift classes with identity) and get that API from this protocol.
//
// `%@` on Linux: swift-corelibs-foundation formats through CoreFoundation, which reads a `%@`
// argument as a pointer to a Foundation object and prints its description. Swift passes a
// `CVarArg` through `withVaList`, which asks a `_CVarArgObject` for the object to encode and
// keeps that object alive until the formatting is done (there is no autorelease pool on Linux).
// Foundation's `String` formats the same way, through an `NSString`. `NSObject` itself is not
// a `CVarArg` on Linux, so being an NSObject subclass would not give `%@` either.

/// The `NSObject` methods that code written for Core Bluetooth calls on its objects:
/// ``isEqual(_:)``, ``hash``, and formatting with `%@` in `String(format:)` and `NSLog`.
///
/// ``BluetoothUUID`` (`CBUUID`), ``Peripheral``, ``Service``, ``Characteristic``, ``Descriptor``
/// (and their mutable subclasses), ``Central``, ``ATTRequest``, ``L2CAPChannel`` and the two
/// managers conform, as do ``Peer``s. `isEqual(_:)` is `==` (identity for the classes, the 128-bit value for a UUID,
/// the identifier for a ``Central``) and `hash` is `hashValue`, so objects that are equal have
/// equal hashes, as `NSObject`'s contract asks. `%@` prints the type's `description` (a UUID
/// prints its ``BluetoothUUID/uuidString``). Any thread.
public protocol CoreBluetoothObject: Hashable, CustomStringConvertible, _CVarArgObject {}

extension CoreBluetoothObject {
    /// Whether `object` is of this type and equal to this one (`==`), as `NSObject.isEqual(_:)`;
    /// false for nil and for any other type.
    public func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? Self else { return false }
        return other == self
    }

    /// The hash value, as `NSObject.hash`: equal objects have equal hashes.
    public var hash: Int { hashValue }

    /// The object `%@` formats: an `NSString` of ``description``, which `withVaList` keeps alive
    /// until the formatting is done.
    public var _cVarArgObject: any CVarArg { NSString(string: description) }

    /// The `va_list` encoding of `_cVarArgObject`.
    ///
    /// Foundation's formatting never asks for it: `withVaList` encodes `_cVarArgObject` and
    /// keeps it alive while the list is in use. A caller that asks directly gets a string that is
    /// kept alive for ever rather than a pointer to a released one.
    public var _cVarArgEncoding: [Int] {
        let text = NSString(string: description)
        _ = Unmanaged.passRetained(text)
        return text._cVarArgEncoding
    }
}

extension BluetoothUUID: CoreBluetoothObject {}
extension Peripheral: CoreBluetoothObject {}
extension Service: CoreBluetoothObject {}
extension Characteristic: CoreBluetoothObject {}
extension Descriptor: CoreBluetoothObject {}
extension Central: CoreBluetoothObject {}

extension ATTRequest: CoreBluetoothObject {
    /// Whether `a` and `b` are the same request (identity, as Core Bluetooth's objects compare).
    public static func == (a: ATTRequest, b: ATTRequest) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension L2CAPChannel: CoreBluetoothObject {
    /// Whether `a` and `b` are the same channel (identity, as Core Bluetooth's objects compare).
    public static func == (a: L2CAPChannel, b: L2CAPChannel) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension CentralManager: CoreBluetoothObject {
    /// Whether `a` and `b` are the same manager (identity, as Core Bluetooth's objects compare).
    public static func == (a: CentralManager, b: CentralManager) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The class and the object's address, as `NSObject` describes an object.
    public var description: String { "<CentralManager: \(Unmanaged.passUnretained(self).toOpaque())>" }
}

extension PeripheralManager: CoreBluetoothObject {
    /// Whether `a` and `b` are the same manager (identity, as Core Bluetooth's objects compare).
    public static func == (a: PeripheralManager, b: PeripheralManager) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The class and the object's address, as `NSObject` describes an object.
    public var description: String { "<PeripheralManager: \(Unmanaged.passUnretained(self).toOpaque())>" }
}
