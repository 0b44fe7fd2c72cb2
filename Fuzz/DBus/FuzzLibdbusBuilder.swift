// Mode 2: messages built with libdbus's own append calls.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Mode 2: messages built with libdbus

func fuzzBuilt(_ input: inout FuzzInput) {
    let builder = FuzzLibdbusBuilder()
    guard let raw = builder.header(&input) else { return }
    let message = DBusMessage(owning: raw)
    var signature = ""
    var iter = DBusMessageIter()
    dbus_message_iter_init_append(raw, &iter)
    var generator = FuzzTypeGenerator(strict: true, allowFD: true)
    let count = input.below(5)
    if dbus_message_get_type(raw) == CDBUS_MESSAGE_TYPE_ERROR, input.oneIn(2) {
        builder.append(.basic(UInt8(ascii: "s")), &iter, &input, depth: 0)
        signature = "s"
    }
    for _ in 0..<count {
        let type = generator.make(&input)
        let typeSignature = type.signature
        guard signature.utf8.count + typeSignature.utf8.count <= 255 else { break }
        builder.append(type, &iter, &input, depth: 0)
        signature += typeSignature
    }
    fuzzFinishAndCheck(message)
}

/// Marshals, demarshals (libdbus validates) and checks the copy; a message
/// with file descriptors cannot go through the wire form, so it is checked as built.
func fuzzFinishAndCheck(_ message: DBusMessage) {
    if dbus_message_get_serial(message.raw) == 0 { dbus_message_set_serial(message.raw, 7) }
    guard let wire = fuzzMarshal(message) else { fuzzFail("libdbus cannot fuzzMarshal a message it built") }
    let (copy, reason) = fuzzDemarshalWithReason(wire)
    if let copy {
        fuzzCheckReceived(copy)
    } else if reason.contains("Unix file descriptor") {
        fuzzCheckReceived(message)
    }
}

/// Appends generated values through libdbus's own API (never our writer), within its limits.
final class FuzzLibdbusBuilder {
    var budget = 512
    var descriptors = 0

    func header(_ input: inout FuzzInput) -> OpaquePointer? {
        let path = FuzzText.objectPath(&input)
        var interface = FuzzText.dottedName(&input)
        if !FuzzText.valid(interface, dbus_validate_interface) { interface = "org.example.Fuzz" }
        var member = FuzzText.member(&input)
        if !FuzzText.valid(member, dbus_validate_member) { member = "Member" }
        let raw: OpaquePointer?
        switch input.below(4) {
        case 0:
            raw = dbus_message_new_method_call(nil, path, input.oneIn(3) ? nil : interface, member)
        case 1:
            raw = dbus_message_new_signal(path, interface, member)
        case 2:
            raw = dbus_message_new(CDBUS_MESSAGE_TYPE_METHOD_RETURN)
            if let raw { dbus_message_set_reply_serial(raw, max(1, input.uint32())) }
        default:
            raw = dbus_message_new(CDBUS_MESSAGE_TYPE_ERROR)
            if let raw {
                var name = FuzzText.dottedName(&input)
                if !FuzzText.valid(name, dbus_validate_error_name) { name = "org.bluez.Error.Failed" }
                dbus_message_set_error_name(raw, name)
                dbus_message_set_reply_serial(raw, max(1, input.uint32()))
            }
        }
        guard let raw else { return nil }
        let sender = FuzzText.dottedName(&input, unique: input.oneIn(2))
        if FuzzText.valid(sender, dbus_validate_bus_name) { dbus_message_set_sender(raw, sender) }
        if input.oneIn(2) {
            let destination = FuzzText.dottedName(&input, unique: input.oneIn(2))
            if FuzzText.valid(destination, dbus_validate_bus_name) { dbus_message_set_destination(raw, destination) }
        }
        dbus_message_set_no_reply(raw, input.oneIn(4) ? 1 : 0)
        dbus_message_set_serial(raw, max(1, input.uint32()))
        return raw
    }

    func append(_ type: FuzzType, _ iter: UnsafeMutablePointer<DBusMessageIter>, _ input: inout FuzzInput, depth: Int) {
        budget -= 1
        switch type {
        case .basic(let code):
            appendBasic(code, iter, &input)
        case .array(let element):
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_ARRAY, element.signature, &sub) != 0 else {
                fuzzFail("libdbus refused to open an array of \(element.signature)")
            }
            if case .basic(let code) = element, code == UInt8(ascii: "y"), input.oneIn(2) {
                // The fixed-array path, as a BLE value is written.
                let bytes = budget > 0 ? input.take(input.below(64)) : []
                bytes.withUnsafeBufferPointer { buffer in
                    var base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    _ = dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, &base, Int32(buffer.count))
                }
            } else {
                let count = budget > 0 ? input.below(5) : 0
                for _ in 0..<count { append(element, &sub, &input, depth: depth + 1) }
            }
            close(iter, &sub)
        case .dictionary(let key, let value):
            var sub = DBusMessageIter()
            let entry = "{" + String(UnicodeScalar(key)) + value.signature + "}"
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_ARRAY, entry, &sub) != 0 else {
                fuzzFail("libdbus refused to open a dictionary \(entry)")
            }
            let count = budget > 0 ? input.below(4) : 0
            for _ in 0..<count {
                var pair = DBusMessageIter()
                _ = dbus_message_iter_open_container(&sub, CDBUS_TYPE_DICT_ENTRY, nil, &pair)
                appendBasic(key, &pair, &input)
                append(value, &pair, &input, depth: depth + 2)
                close(&sub, &pair)
            }
            close(iter, &sub)
        case .structure(let fields):
            var sub = DBusMessageIter()
            _ = dbus_message_iter_open_container(iter, CDBUS_TYPE_STRUCT, nil, &sub)
            for field in fields { append(field, &sub, &input, depth: depth + 1) }
            close(iter, &sub)
        case .variant:
            // Within the 64-container limit of a body, or a little beyond, which libdbus's
            // validator must then reject (we only decode what it accepts). Never far beyond:
            // libdbus's writer counts nested open containers in 8 bits and corrupts its
            // memory past 255 (our writer is safe: validation allows 64 before appending).
            var generator = FuzzTypeGenerator(strict: true, allowFD: descriptors < 4, maxNesting: 67 - depth)
            let inner: FuzzType =
                depth < 66 && budget > 0 ? generator.make(&input) : .basic(UInt8(ascii: "y"))
            var sub = DBusMessageIter()
            guard dbus_message_iter_open_container(iter, CDBUS_TYPE_VARIANT, inner.signature, &sub) != 0 else {
                fuzzFail("libdbus refused to open a variant of \(inner.signature)")
            }
            append(inner, &sub, &input, depth: depth + 1)
            close(iter, &sub)
        }
    }

    private func close(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ sub: UnsafeMutablePointer<DBusMessageIter>) {
        guard dbus_message_iter_close_container(iter, sub) != 0 else { fuzzFail("libdbus could not close a container") }
    }

    func appendBasic(_ code: UInt8, _ iter: UnsafeMutablePointer<DBusMessageIter>, _ input: inout FuzzInput) {
        let ok: dbus_bool_t
        switch code {
        case UInt8(ascii: "y"):
            var v = input.byte()
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_BYTE, &v)
        case UInt8(ascii: "b"):
            var v: dbus_bool_t = input.oneIn(2) ? 1 : 0
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_BOOLEAN, &v)
        case UInt8(ascii: "n"):
            var v = Int16(bitPattern: input.uint16())
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT16, &v)
        case UInt8(ascii: "q"):
            var v = input.uint16()
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT16, &v)
        case UInt8(ascii: "i"):
            var v = Int32(bitPattern: input.uint32())
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT32, &v)
        case UInt8(ascii: "u"):
            var v = input.uint32()
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT32, &v)
        case UInt8(ascii: "x"):
            var v = Int64(bitPattern: input.uint64())
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_INT64, &v)
        case UInt8(ascii: "t"):
            var v = input.uint64()
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UINT64, &v)
        case UInt8(ascii: "d"):
            var v = Double(bitPattern: input.uint64())
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_DOUBLE, &v)
        case UInt8(ascii: "h"):
            descriptors += 1
            var fd = fuzzDevNull
            ok = dbus_message_iter_append_basic(iter, CDBUS_TYPE_UNIX_FD, &fd)
        case UInt8(ascii: "o"):
            ok = Self.appendString(FuzzText.objectPath(&input), CDBUS_TYPE_OBJECT_PATH, iter)
        case UInt8(ascii: "g"):
            var generator = FuzzTypeGenerator(strict: true, allowFD: true)
            var signature = input.oneIn(4) ? "" : generator.make(&input).signature
            if input.oneIn(3) { signature += generator.make(&input).signature }
            if !FuzzText.valid(signature, dbus_signature_validate) { signature = "" }
            ok = Self.appendString(signature, CDBUS_TYPE_SIGNATURE, iter)
        default:
            ok = Self.appendString(FuzzText.string(&input), CDBUS_TYPE_STRING, iter)
        }
        if ok == 0 { fuzzFail("libdbus refused a basic value of type \(UnicodeScalar(code))") }
    }

    static func appendString(_ s: String, _ type: Int32, _ iter: UnsafeMutablePointer<DBusMessageIter>) -> dbus_bool_t {
        s.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(iter, type, &pointer)
        }
    }
}
