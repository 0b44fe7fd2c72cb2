// Mode 4: PropertiesChanged-shaped signals and near misses.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Mode 4: PropertiesChanged shapes

func fuzzPropertiesChanged(_ input: inout FuzzInput) {
    let builder = FuzzLibdbusBuilder()
    let path = FuzzText.objectPath(&input)
    let interface = input.oneIn(8) ? "org.example.Other" : "org.freedesktop.DBus.Properties"
    let member = input.oneIn(8) ? "Changed" : "PropertiesChanged"
    guard let raw = dbus_message_new_signal(path, interface, member) else { return }
    let message = DBusMessage(owning: raw)
    dbus_message_set_sender(raw, ":1.\(input.byte())")
    var iter = DBusMessageIter()
    dbus_message_iter_init_append(raw, &iter)
    let shape = input.below(8)
    if shape == 7 {
        // Any body at all.
        var generator = FuzzTypeGenerator(strict: true, allowFD: false)
        var signature = ""
        for _ in 0..<input.below(4) {
            let type = generator.make(&input)
            guard signature.utf8.count + type.signature.utf8.count <= 255 else { break }
            signature += type.signature
            builder.append(type, &iter, &input, depth: 0)
        }
        return fuzzFinishAndCheck(message)
    }
    // s: the interface whose properties changed.
    let names = ["org.bluez.GattCharacteristic1", "org.bluez.Device1"]
    var changedInterface = input.oneIn(6) ? FuzzText.string(&input) : names[input.below(2)]
    changedInterface = changedInterface.replacingOccurrences(of: "\u{0}", with: "")
    _ = FuzzLibdbusBuilder.appendString(changedInterface, CDBUS_TYPE_STRING, &iter)
    // a{sv}: the changed properties.
    var dict = DBusMessageIter()
    _ = dbus_message_iter_open_container(&iter, CDBUS_TYPE_ARRAY, "{sv}", &dict)
    let entries = input.below(8) < 5 ? 1 : input.below(4)
    for _ in 0..<entries {
        var entry = DBusMessageIter()
        _ = dbus_message_iter_open_container(&dict, CDBUS_TYPE_DICT_ENTRY, nil, &entry)
        let keys = ["Value", "Notifying", "Value\u{301}", "value"]
        let key = input.oneIn(8) ? FuzzText.string(&input) : keys[input.below(8) < 5 ? 0 : input.below(4)]
        _ = FuzzLibdbusBuilder.appendString(key, CDBUS_TYPE_STRING, &entry)
        let kind = input.below(8)
        let valueType: FuzzType
        if kind < 5 {
            valueType = .array(.basic(UInt8(ascii: "y")))
        } else if kind == 5 {
            valueType = .variant
        } else {
            var generator = FuzzTypeGenerator(strict: true, allowFD: false)
            valueType = generator.make(&input)
        }
        var variant = DBusMessageIter()
        _ = dbus_message_iter_open_container(&entry, CDBUS_TYPE_VARIANT, valueType.signature, &variant)
        builder.append(valueType, &variant, &input, depth: 3)
        _ = dbus_message_iter_close_container(&entry, &variant)
        _ = dbus_message_iter_close_container(&dict, &entry)
    }
    _ = dbus_message_iter_close_container(&iter, &dict)
    // as: the invalidated properties.
    if shape != 6 {
        var array = DBusMessageIter()
        _ = dbus_message_iter_open_container(&iter, CDBUS_TYPE_ARRAY, "s", &array)
        for _ in 0..<(input.below(4) == 0 ? 1 + input.below(3) : 0) {
            _ = FuzzLibdbusBuilder.appendString(FuzzText.string(&input), CDBUS_TYPE_STRING, &array)
        }
        _ = dbus_message_iter_close_container(&iter, &array)
    }
    if shape == 5 {
        builder.appendBasic(fuzzBasicCodes[input.below(12)], &iter, &input)
    }
    fuzzFinishAndCheck(message)
}
