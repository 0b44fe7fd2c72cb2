/// One D-Bus value of any type, as a `Sendable` Swift value.
///
/// Containers keep their element signature so that empty arrays and
/// dictionaries round-trip. Byte arrays (`ay`) have their own case, `bytes`,
/// read and written in one copy.
///
/// Only the cases that hold a value by value (`variant`) or a large payload (`dictionary`: two
/// signatures and the entries) are `indirect`: a scalar, a string or an array is stored in
/// place, so decoding one makes no heap box for it (an `indirect` enum boxes every case, an
/// allocation and a release per value decoded).
package enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(DBusSignature)
    case unixFD(UnixFileDescriptor)
    /// `ay`.
    case bytes([UInt8])
    /// `a<element>` for any element but bytes and dict entries.
    case array(element: DBusSignature, [DBusValue])
    /// `a{<key><value>}`, entries in message order.
    indirect case dictionary(key: DBusSignature, value: DBusSignature, [DictionaryEntry])
    /// `(…)`.
    case structure([DBusValue])
    /// `v`.
    indirect case variant(DBusValue)

    /// One entry of a dictionary.
    package struct DictionaryEntry: Sendable, Hashable {
        package var key: DBusValue
        package var value: DBusValue
        package init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value's D-Bus signature.
    package var signature: DBusSignature { DBusSignature(trusted: signatureString) }

    var signatureString: String {
        switch self {
        case .byte: return "y"
        case .bool: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .bytes: return "ay"
        case .array(let element, _): return "a" + element.rawValue
        case .dictionary(let key, let value, _): return "a{" + key.rawValue + value.rawValue + "}"
        case .structure(let fields): return "(" + fields.map(\.signatureString).joined() + ")"
        case .variant: return "v"
        }
    }
}

// MARK: - Building values

extension DBusValue {
    /// An `a{sv}` dictionary from string keys (sorted, so messages are reproducible).
    package static func stringVariantDictionary(_ entries: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: "s", value: "v",
            entries.sorted { $0.key < $1.key }.map { DictionaryEntry(.string($0.key), .variant($0.value)) })
    }

    /// An `as` array.
    package static func stringArray(_ strings: [String]) -> DBusValue {
        .array(element: "s", strings.map(DBusValue.string))
    }

    /// An `ao` array.
    package static func objectPathArray(_ paths: [ObjectPath]) -> DBusValue {
        .array(element: "o", paths.map(DBusValue.objectPath))
    }
}

// MARK: - Reading values

extension DBusValue {
    /// The value inside any number of variants.
    package var unwrappingVariants: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }

    package var stringValue: String? {
        if case .string(let s) = unwrappingVariants { return s }
        return nil
    }
    package var objectPathValue: ObjectPath? {
        if case .objectPath(let p) = unwrappingVariants { return p }
        return nil
    }
    package var boolValue: Bool? {
        if case .bool(let b) = unwrappingVariants { return b }
        return nil
    }
    package var byteValue: UInt8? {
        if case .byte(let b) = unwrappingVariants { return b }
        return nil
    }
    package var int16Value: Int16? {
        if case .int16(let v) = unwrappingVariants { return v }
        return nil
    }
    package var uint16Value: UInt16? {
        if case .uint16(let v) = unwrappingVariants { return v }
        return nil
    }
    package var int32Value: Int32? {
        if case .int32(let v) = unwrappingVariants { return v }
        return nil
    }
    package var uint32Value: UInt32? {
        if case .uint32(let v) = unwrappingVariants { return v }
        return nil
    }
    package var int64Value: Int64? {
        if case .int64(let v) = unwrappingVariants { return v }
        return nil
    }
    package var uint64Value: UInt64? {
        if case .uint64(let v) = unwrappingVariants { return v }
        return nil
    }
    package var doubleValue: Double? {
        if case .double(let v) = unwrappingVariants { return v }
        return nil
    }
    package var bytesValue: [UInt8]? {
        if case .bytes(let b) = unwrappingVariants { return b }
        return nil
    }
    package var unixFDValue: UnixFileDescriptor? {
        if case .unixFD(let fd) = unwrappingVariants { return fd }
        return nil
    }
    /// Elements of an array (not of a byte array or dictionary).
    package var arrayValue: [DBusValue]? {
        if case .array(_, let elements) = unwrappingVariants { return elements }
        return nil
    }
    package var stringArrayValue: [String]? {
        guard let elements = arrayValue else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for element in elements {
            guard let s = element.stringValue else { return nil }
            strings.append(s)
        }
        return strings
    }
    package var dictionaryEntries: [DictionaryEntry]? {
        if case .dictionary(_, _, let entries) = unwrappingVariants { return entries }
        return nil
    }
    /// An `a{s…}` dictionary as a Swift dictionary; the last duplicate key wins.
    package var stringKeyedDictionary: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var result: [String: DBusValue] = [:]
        result.reserveCapacity(entries.count)
        for entry in entries {
            guard case .string(let key) = entry.key else { return nil }
            result[key] = entry.value
        }
        return result
    }
    package var structureFields: [DBusValue]? {
        if case .structure(let fields) = unwrappingVariants { return fields }
        return nil
    }
}
