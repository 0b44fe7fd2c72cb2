// Modes 0 and 1 (raw bytes, repaired framing) and libdbus's wire form.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Mode 0/1: raw bytes

func fuzzRaw(_ original: [UInt8], repairFraming: Bool) {
    var bytes = original
    if repairFraming { fuzzRepairFraming(&bytes) }
    guard let message = fuzzDemarshal(bytes) else {
        fuzzBodyDecoderOnRejected(bytes)
        return
    }
    fuzzCheckReceived(message)
}

/// DBusBodyDecoder on bytes libdbus rejected: whatever it returns or throws, it must not
/// trap or read past the buffer (AddressSanitizer). The signature comes from a short list
/// picked by the input; the body is what follows the framing, or the whole input.
func fuzzBodyDecoderOnRejected(_ bytes: [UInt8]) {
    let signatures = ["a{oa{sa{sv}}}", "v", "sa{sv}as", "a(yv)", "ay", "a{qv}", "(ibxtd)", "aav", "g", "o", "s"]
    let signature = signatures[Int(bytes.first ?? 0) % signatures.count]
    let body = bytes.withUnsafeBytes { buffer -> [UInt8] in
        guard let (offset, length, _) = try? DBusMessage.bodyRange(buffer) else { return bytes }
        return Array(bytes[offset..<offset + length])
    }
    for bigEndian in [false, true] {
        _ = try? DBusBodyDecoder.decode(body: body, signature: signature, bigEndian: bigEndian)
        if signature == "a{oa{sa{sv}}}" {
            _ = body.withUnsafeBytes {
                try? DBusBodyDecoder.managedObjects(body: $0, signature: signature, bigEndian: bigEndian)
            }
        }
    }
}

/// Makes the 16-byte fixed header consistent with the input's length, so that
/// libdbus validates the header fields and the body instead of rejecting the framing.
func fuzzRepairFraming(_ bytes: inout [UInt8]) {
    if bytes.count < 16 { bytes += [UInt8](repeating: 0, count: 16 - bytes.count) }
    let little = bytes[0] != UInt8(ascii: "B")
    bytes[0] = little ? UInt8(ascii: "l") : UInt8(ascii: "B")
    if !(1...4).contains(bytes[1]) { bytes[1] = bytes[1] % 4 + 1 }
    bytes[3] = 1
    func read32(_ at: Int) -> UInt32 {
        let b = bytes[at..<at + 4].map(UInt32.init)
        return little ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
    }
    func write32(_ at: Int, _ value: UInt32) {
        for i in 0..<4 {
            let shift = UInt32(little ? i * 8 : (3 - i) * 8)
            bytes[at + i] = UInt8(truncatingIfNeeded: value >> shift)
        }
    }
    if read32(8) == 0 { write32(8, 1) }
    var fields = Int(read32(12))
    if fields > bytes.count - 16 { fields %= bytes.count - 16 + 1 }
    write32(12, UInt32(fields))
    let headerEnd = (16 + fields + 7) & ~7
    if headerEnd > bytes.count { bytes += [UInt8](repeating: 0, count: headerEnd - bytes.count) }
    write32(4, UInt32(bytes.count - headerEnd))
}

/// libdbus's own parser and validator: nil for anything it rejects.
func fuzzDemarshal(_ bytes: [UInt8]) -> DBusMessage? {
    fuzzDemarshalWithReason(bytes).message
}

/// The message, or libdbus's reason for rejecting the bytes.
func fuzzDemarshalWithReason(_ bytes: [UInt8]) -> (message: DBusMessage?, reason: String) {
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    defer { dbus_error_free(&error) }
    let raw = bytes.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { dbus_message_demarshal($0.baseAddress, Int32(buffer.count), &error) }
    }
    return (raw.map { DBusMessage(owning: $0) }, error.message.map { String(cString: $0) } ?? "")
}

/// The wire form of `message` (locks it); nil when libdbus cannot fuzzMarshal it.
func fuzzMarshal(_ message: DBusMessage) -> [UInt8]? {
    if dbus_message_get_serial(message.raw) == 0 { dbus_message_set_serial(message.raw, 1) }
    var buffer: UnsafeMutablePointer<CChar>? = nil
    var length: Int32 = 0
    guard dbus_message_marshal(message.raw, &buffer, &length) != 0, let buffer else { return nil }
    defer { dbus_free(buffer) }
    return buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
        Array(UnsafeBufferPointer(start: $0, count: Int(length)))
    }
}
