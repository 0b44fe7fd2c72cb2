// libFuzzer target for the BlueZ layer: how Sources/BlueZ reads what bluetoothd sends.
//
// Built outside SwiftPM by `Scripts/fuzz --target bluez`: Sources/DBus/*.swift is compiled
// as module DBus first, then Sources/BlueZ/*.swift with Fuzz/BlueZ/*.swift and
// Fuzz/Shared/*.swift as module BlueZ, so the target sees BlueZ's internal API and DBus's
// package API, as the library's own code does.
//
// The first input byte chooses a mode (byte % 3), the rest drives FuzzBlueZValues:
//
//   0 properties   an `a{sv}` of Device1 / Adapter1 properties (right types, wrong types,
//                  variants in variants, repeated keys) → BlueZDeviceProperties and
//                  BlueZServerFeatures
//   1 objects      a GetManagedObjects reply or InterfacesAdded body, `a{oa{sa{sv}}}` or a
//                  near miss (keys of the wrong type, variants at any level, other property
//                  types, extra arguments) → BlueZObjectCache.decodeManagedObjects (the
//                  DBusBodyDecoder fast path and the general path) and decodeInterfaces, then
//                  the properties of every object, AttributeID / DeviceID tokens and
//                  BlueZGattRequest.address(of:) of every path
//   2 options      the arguments of ReadValue / WriteValue / AcquireWrite calls from bluetoothd
//                  → BlueZGattRequest.options (offset, mtu, device, type, prepare-authorize)
//
// Oracles (FuzzBlueZChecks.swift): nothing traps (AddressSanitizer, LeakSanitizer watch too);
// every reading is the documented one, computed here independently from the value (a
// property of another type is absent, a malformed tree is nil, malformed options are
// InvalidArguments); the two decoding paths of a reply agree; and every value survives
// being sent in a message and decoded again with the same reading.
//
// `--make-corpus=DIR` writes the seed corpus (fixed pseudo-random streams per mode) and exits.

import DBus

#if canImport(Glibc)
    import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func blueZFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    var input = FuzzInput(UnsafeBufferPointer(start: data, count: size))
    var values = FuzzBlueZValues()
    switch input.byte() % 3 {
    case 0: fuzzProperties(&input, &values)
    case 1: fuzzManagedObjects(&input, &values)
    default: fuzzRequestOptions(&input, &values)
    }
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func blueZFuzzerInitialize(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    if let directory = fuzzMakeCorpusArgument(argc, argv) {
        exit(fuzzWriteSeeds(fuzzGeneratorSeeds(modes: 0..<3), to: directory) ? 0 : 1)
    }
    return 0
}

// MARK: - Mode 0: properties

func fuzzProperties(_ input: inout FuzzInput, _ values: inout FuzzBlueZValues) {
    let dictionary = DBusValue.dictionary(key: "s", value: "v", values.propertyEntries(&input))
    guard let properties = dictionary.stringKeyedDictionary else { fuzzFail("an a{sv} is not string-keyed") }
    fuzzCheckProperties(properties)
    // As the cache keeps them (variants unwrapped), the reading is the same.
    let device = BlueZDeviceProperties(properties)
    fuzzCheck(BlueZDeviceProperties(properties.mapValues(\.unwrappingVariants)) == device, "unwrapped variants")
    // Sent and received again.
    let back = fuzzSentAndReceived([dictionary])
    guard let received = back.first?.stringKeyedDictionary else { fuzzFail("a{sv} did not come back") }
    fuzzCheck(BlueZDeviceProperties(received) == device, "device properties differ after a round trip")
}

// MARK: - Mode 1: object trees

func fuzzManagedObjects(_ input: inout FuzzInput, _ values: inout FuzzBlueZValues) {
    // The shape: which level is off, if any.
    let shape = input.below(16)
    var objects: [DBusValue.DictionaryEntry] = []
    for _ in 0..<(input.below(input.oneIn(8) ? 24 : 5)) {
        let interfaces: [DBusValue.DictionaryEntry] = (0..<input.below(4)).map { _ in
            let name = FuzzBlueZValues.interfaces[input.below(FuzzBlueZValues.interfaces.count)]
            let properties = DBusValue.dictionary(key: "s", value: "v", values.propertyEntries(&input))
            return .init(
                shape == 1 ? .objectPath(.root) : .string(name), shape == 2 ? .variant(properties) : properties)
        }
        let path = values.objectPath(&input)
        let key: DBusValue = shape == 3 ? .string(path.rawValue) : .objectPath(path)
        var value = DBusValue.dictionary(key: shape == 1 ? "o" : "s", value: shape == 2 ? "v" : "a{sv}", interfaces)
        if shape == 4 { value = .variant(value) }
        if shape == 5 { value = .variant(values.any(&input)) }
        objects.append(.init(key, value))
    }
    if shape == 6, !objects.isEmpty {
        // Another value type for one object: the whole dictionary's value type becomes `v`.
        objects = objects.map { .init($0.key, .variant($0.value)) }
        objects[input.below(objects.count)].value = .variant(values.any(&input))
    }
    let valueType: DBusSignature =
        switch shape {
        case 1: "a{oa{sv}}"
        case 2: "a{sv}"
        case 4, 5, 6: "v"
        default: "a{sa{sv}}"
        }
    let tree = DBusValue.dictionary(key: shape == 3 ? "s" : "o", value: valueType, objects)
    var arguments = [tree]
    switch shape {
    case 7: arguments = [.variant(tree)]
    case 8: arguments.append(.string(values.text(&input)))
    case 9: arguments = []
    case 10: arguments = [values.any(&input)]
    default: break
    }
    fuzzCheckManagedObjects(arguments)
}

// MARK: - Mode 2: GATT request options

func fuzzRequestOptions(_ input: inout FuzzInput, _ values: inout FuzzBlueZValues) {
    let names = ["offset", "mtu", "device", "type", "prepare-authorize", "link"]
    var entries: [DBusValue.DictionaryEntry] = (0..<input.below(7)).map { _ in
        let name = input.oneIn(12) ? values.text(&input) : names[input.below(names.count)]
        return .init(.string(name), .variant(values.property(name, &input)))
    }
    if input.oneIn(8), !entries.isEmpty {
        // Another order (the last of repeated keys wins).
        entries = Array(entries.reversed().dropFirst(input.below(2))) + entries.prefix(1)
    }
    var options = DBusValue.dictionary(key: "s", value: "v", entries)
    switch input.below(12) {
    case 0: options = values.any(&input)
    case 1: options = .variant(options)
    case 2: options = .dictionary(key: "s", value: "s", entries.map { .init($0.key, .string(values.text(&input))) })
    default: break
    }
    var arguments: [DBusValue]
    switch input.below(6) {
    case 0: arguments = [options]  // ReadValue, AcquireWrite, AcquireNotify
    case 1: arguments = []
    case 2: arguments = [options, .string(values.text(&input))]
    default: arguments = [values.value(ofType: "ay", &input), options]  // WriteValue
    }
    fuzzCheckOptions(arguments)
}
