// The oracles of the BlueZ target: the documented reading of each value, computed here
// from the value itself by pattern matching (not with the library's accessors), compared
// with what Sources/BlueZ reads.

import DBus

// MARK: - Spec readings

/// The value inside any number of variants.
private func bare(_ value: DBusValue?) -> DBusValue? {
    guard var value else { return nil }
    while case .variant(let inner) = value { value = inner }
    return value
}

private func specString(_ value: DBusValue?) -> String? {
    if case .string(let s)? = bare(value) { return s }
    return nil
}

private func specBool(_ value: DBusValue?) -> Bool? {
    if case .bool(let b)? = bare(value) { return b }
    return nil
}

private func specInt16(_ value: DBusValue?) -> Int16? {
    if case .int16(let v)? = bare(value) { return v }
    return nil
}

private func specUInt16(_ value: DBusValue?) -> UInt16? {
    if case .uint16(let v)? = bare(value) { return v }
    return nil
}

private func specPath(_ value: DBusValue?) -> ObjectPath? {
    if case .objectPath(let p)? = bare(value) { return p }
    return nil
}

private func specBytes(_ value: DBusValue?) -> [UInt8]? {
    if case .bytes(let b)? = bare(value) { return b }
    return nil
}

/// An array of strings (each possibly in variants); nil for anything else.
private func specStrings(_ value: DBusValue?) -> [String]? {
    guard case .array(_, let elements)? = bare(value) else { return nil }
    var strings: [String] = []
    for element in elements {
        guard let s = specString(element) else { return nil }
        strings.append(s)
    }
    return strings
}

/// The entries of a dictionary; nil for anything else.
private func specEntries(_ value: DBusValue?) -> [DBusValue.DictionaryEntry]? {
    if case .dictionary(_, _, let entries)? = bare(value) { return entries }
    return nil
}

/// A string-keyed dictionary (the last of repeated keys wins); nil for anything else.
private func specStringKeyed(_ value: DBusValue?) -> [String: DBusValue]? {
    guard let entries = specEntries(value) else { return nil }
    var result: [String: DBusValue] = [:]
    for entry in entries {
        guard case .string(let key) = entry.key else { return nil }
        result[key] = entry.value
    }
    return result
}

/// `a{Kv}` with byte-array values; entries of another shape are left out.
private func specKeyedBytes<Key: Hashable>(_ value: DBusValue?, _ key: (DBusValue) -> Key?) -> [Key: [UInt8]] {
    var result: [Key: [UInt8]] = [:]
    for entry in specEntries(value) ?? [] {
        if let k = key(entry.key), let bytes = specBytes(entry.value) { result[k] = bytes }
    }
    return result
}

/// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` → `AA:BB:CC:DD:EE:FF`; nil unless the last element starts with `dev_`.
private func specAddress(_ path: ObjectPath) -> String? {
    // bluetoothd's device element: "dev_" and the address, its colons as underscores (17 characters).
    guard let last = path.rawValue.split(separator: "/").last, last.hasPrefix("dev_") else { return nil }
    let address = String(last.dropFirst(4).map { $0 == "_" ? ":" : $0 })
    let hexDigits = Set("0123456789abcdefABCDEF")
    let wellFormed =
        address.count == 17
        && address.enumerated().allSatisfy { index, character in
            index % 3 == 2 ? character == ":" : hexDigits.contains(character)
        }
    return wellFormed ? address : nil
}

// MARK: - Properties

/// BlueZDeviceProperties and BlueZServerFeatures read `properties` as documented: a
/// property of another type is absent (its default), never a trap.
func fuzzCheckProperties(_ properties: [String: DBusValue]) {
    let device = BlueZDeviceProperties(properties)
    func check<T: Equatable>(_ ours: T, _ expected: T, _ name: String) {
        fuzzCheck(ours == expected, "BlueZDeviceProperties.\(name) = \(ours), expected \(expected)")
    }
    check(device.address, specString(properties["Address"]), "address")
    check(device.addressType, specString(properties["AddressType"]), "addressType")
    check(device.name, specString(properties["Name"]), "name")
    check(device.alias, specString(properties["Alias"]), "alias")
    check(device.adapter, specPath(properties["Adapter"]), "adapter")
    check(device.rssi, specInt16(properties["RSSI"]), "rssi")
    check(device.txPower, specInt16(properties["TxPower"]), "txPower")
    check(device.uuids, specStrings(properties["UUIDs"]) ?? [], "uuids")
    check(
        device.manufacturerData, specKeyedBytes(properties["ManufacturerData"]) { specUInt16($0) }, "manufacturerData")
    check(device.serviceData, specKeyedBytes(properties["ServiceData"]) { specString($0) }, "serviceData")
    check(device.advertisingFlags, specBytes(properties["AdvertisingFlags"]), "advertisingFlags")
    check(
        device.advertisingData,
        specKeyedBytes(properties["AdvertisingData"]) { if case .byte(let b)? = bare($0) { b } else { nil } },
        "advertisingData")
    check(device.connected, specBool(properties["Connected"]) ?? false, "connected")
    check(device.servicesResolved, specBool(properties["ServicesResolved"]) ?? false, "servicesResolved")
    check(device.paired, specBool(properties["Paired"]) ?? false, "paired")
    check(device.bonded, specBool(properties["Bonded"]) ?? device.paired, "bonded")
    check(device.trusted, specBool(properties["Trusted"]) ?? false, "trusted")

    // Present from 5.79 on, whatever its value.
    let features = BlueZServerFeatures(adapterProperties: properties)
    let atLeast579 = properties["Connectable"] != nil
    fuzzCheck(
        features == BlueZServerFeatures(perDeviceNotifySockets: atLeast579, extendedAdvertising: atLeast579),
        "BlueZServerFeatures")
}

// MARK: - Object trees

typealias FuzzTree = [ObjectPath: BlueZObjectCache.Interfaces]

/// The tree an `a{oa{sa{sv}}}` describes (variants allowed around any dictionary, never
/// around a key); nil for any other shape.
private func specTree(_ value: DBusValue?) -> FuzzTree? {
    guard let entries = specEntries(value) else { return nil }
    var tree: FuzzTree = [:]
    for entry in entries {
        guard case .objectPath(let path) = entry.key, let interfaces = specInterfaces(entry.value) else { return nil }
        tree[path] = interfaces
    }
    return tree
}

private func specInterfaces(_ value: DBusValue) -> BlueZObjectCache.Interfaces? {
    guard let entries = specEntries(value) else { return nil }
    var interfaces: BlueZObjectCache.Interfaces = [:]
    for entry in entries {
        guard case .string(let name) = entry.key, let properties = specStringKeyed(entry.value) else { return nil }
        interfaces[name] = properties.mapValues { bare($0)! }
    }
    return interfaces
}

/// Both decoding paths of a reply (DBusBodyDecoder for `a{oa{sa{sv}}}`, the generic one
/// otherwise) give the documented tree, also after a round trip; then the properties,
/// tokens and addresses of every object read as documented.
func fuzzCheckManagedObjects(_ arguments: [DBusValue]) {
    let expected = specTree(arguments.first)
    if let first = arguments.first {
        fuzzCheck(BlueZObjectCache.decodeManagedObjects(first) == expected, "decodeManagedObjects(value)")
        fuzzCheck(
            BlueZObjectCache.decodeInterfaces(first) == specInterfaces(first), "decodeInterfaces of a whole tree")
    }
    let message: DBusMessage
    do throws(DBusError) {
        message = try DBusMessage.methodCall(
            destination: nil, path: .root, interface: .objectManager, member: "GetManagedObjects",
            arguments: arguments)
    } catch {
        fuzzFail("cannot send a generated tree: \(error)")
    }
    let decoded = BlueZObjectCache.decodeManagedObjects(reply: message)
    fuzzCheck(
        decoded == expected,
        "decodeManagedObjects(reply:) of \(message.signature.rawValue) differs from the spec"
            + " (\(decoded?.count ?? -1) objects, expected \(expected?.count ?? -1))")
    // InterfacesAdded: `oa{sa{sv}}`, each object alone.
    for (path, interfaces) in expected ?? [:] {
        guard case .dictionary(_, _, let entries)? = bare(arguments.first),
            let entry = entries.last(where: { $0.key == .objectPath(path) })
        else { fuzzFail("object \(path) not found again") }
        fuzzCheck(BlueZObjectCache.decodeInterfaces(entry.value) == interfaces, "decodeInterfaces of \(path)")
        for properties in interfaces.values { fuzzCheckProperties(properties) }
        fuzzCheckPath(path)
    }
}

/// AttributeID and DeviceID tokens round-trip; a device token needs an address, an attribute
/// token a `/dev_` element.
func fuzzCheckPath(_ path: ObjectPath) {
    let address = BlueZGattRequest.address(of: path)
    fuzzCheck(address == specAddress(path), "address(of: \(path)) = \(address ?? "nil")")
    let device = BlueZClient.DeviceID(token: path.rawValue)
    fuzzCheck((device != nil) == (address != nil), "DeviceID(token: \(path))")
    if let device {
        fuzzCheck(device.token == path.rawValue && device.address == address, "DeviceID token round trip")
    }
    let attribute = BlueZClient.AttributeID(token: path.rawValue)
    fuzzCheck((attribute != nil) == path.rawValue.contains("/dev_"), "AttributeID(token: \(path))")
    if let attribute {
        fuzzCheck(BlueZClient.AttributeID(token: attribute.token) == attribute, "AttributeID token round trip")
        if let device { fuzzCheck(attribute.belongs(to: device), "an attribute's own device") }
    }
}

// MARK: - Request options

/// BlueZGattRequest.options: InvalidArguments exactly when there is no string-keyed
/// dictionary last or its offset is not a `q`; otherwise each option as documented.
func fuzzCheckOptions(_ arguments: [DBusValue]) {
    let dictionary = specStringKeyed(arguments.last)
    let offsetMalformed = dictionary?["offset"].map { specUInt16($0) == nil } ?? false
    let options: BlueZGattRequest.Options
    do throws(DBusError) {
        options = try BlueZGattRequest.options(arguments)
    } catch {
        fuzzCheck(dictionary == nil || offsetMalformed, "options rejected: \(error)")
        fuzzCheck(error.name == "org.bluez.Error.InvalidArguments", "options error name \(error.name)")
        return
    }
    guard let dictionary, !offsetMalformed else { fuzzFail("malformed options accepted: \(options)") }
    let expected = BlueZGattRequest.Options(
        offset: specUInt16(dictionary["offset"]) ?? 0, mtu: specUInt16(dictionary["mtu"]),
        deviceAddress: specPath(dictionary["device"]).flatMap(specAddress), writeType: specString(dictionary["type"]),
        prepareAuthorize: specBool(dictionary["prepare-authorize"]) ?? false)
    fuzzCheck(options == expected, "options \(options), expected \(expected)")
    if let path = specPath(dictionary["device"]) { fuzzCheckPath(path) }
    let back = fuzzSentAndReceived(arguments)
    fuzzCheck((try? BlueZGattRequest.options(back)) == options, "options differ after a round trip")
}

// MARK: - Round trip

/// `values` sent in a method call and read back: equal values (nothing generated here
/// holds a descriptor or a NaN).
func fuzzSentAndReceived(_ values: [DBusValue]) -> [DBusValue] {
    do throws(DBusError) {
        let message = try DBusMessage.methodCall(
            destination: nil, path: .root, interface: nil, member: "WriteValue", arguments: values)
        let back = try message.arguments()
        fuzzCheck(back == values, "generated values do not survive a round trip")
        return back
    } catch {
        fuzzFail("cannot send and receive generated values: \(error)")
    }
}
