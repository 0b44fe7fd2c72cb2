// Mode 3: values constructed through the package API, checked against our writer's contract.

import CDBus

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Mode 3: values constructed through the package API

func fuzzConstructed(_ input: inout FuzzInput) {
    var values: [DBusValue] = []
    let count = 1 + input.below(3)
    var generator = FuzzTypeGenerator(strict: false, allowFD: true)
    var maker = FuzzValueMaker()
    for _ in 0..<count {
        values.append(maker.value(of: generator.make(&input), &input, depth: 0))
    }
    fuzzCheckWriter(values)
}

/// Our writer's contract: `validatedSignature` accepts a value only if libdbus can
/// append it without aborting and the result is a valid message that decodes to
/// the same value; whatever it rejects, it rejects with an error.
func fuzzCheckWriter(_ values: [DBusValue]) {
    var accepted = true
    var signature = ""
    for value in values {
        do {
            let valueSignature = try value.validatedSignature()
            fuzzCheck(
                valueSignature == value.signatureString,
                "validated signature \(valueSignature) != \(value.signatureString)")
            signature += valueSignature
        } catch {
            accepted = false
        }
    }
    let message: DBusMessage
    do {
        // Appends: libdbus aborts the process on anything it considers a programming error.
        message = try DBusMessage.methodCall(
            destination: nil, path: .root, interface: nil, member: "Constructed", arguments: values)
    } catch {
        // Acceptable: a value validation rejects, a message signature that is not valid as a
        // whole (over 255 characters, over 32 nested arrays or structs), an unusable descriptor.
        let acceptable =
            !accepted || !FuzzText.valid(signature, dbus_signature_validate)
            || values.contains { $0.fuzzContainsUnusableFD }
        fuzzCheck(acceptable, "the writer threw \(error) for values it validated: \(signature)")
        return
    }
    fuzzCheck(accepted, "the writer appended values that validation rejects")
    fuzzCheck(
        message.signature.rawValue == signature,
        "message signature \(message.signature.rawValue) != validated \(signature)")
    let decoded: [DBusValue]
    do { decoded = try message.arguments() } catch { fuzzFail("cannot decode what we wrote: \(error)") }
    fuzzCheck(
        fuzzSameValues(decoded, values.map(\.fuzzNormalized)),
        "constructed values do not survive append + decode (signature \(signature))")
    if !values.contains(where: \.fuzzContainsFD) {
        guard let wire = fuzzMarshal(message) else { fuzzFail("libdbus cannot fuzzMarshal what we wrote") }
        let (copy, reason) = fuzzDemarshalWithReason(wire)
        guard let copy else {
            fuzzFail("our writer accepted values that make an invalid message (signature '\(signature)'): \(reason)")
        }
        fuzzCheckReceived(copy)
    } else {
        fuzzCheckReceived(message)
    }
}

/// Makes `DBusValue`s for a type, through the package API only (validated inits).
/// Now and then it breaks the type on purpose (wrong element, invalid key type,
/// empty structure, NUL in a string, closed descriptor): validation must catch those.
struct FuzzValueMaker {
    var budget = 512
    var descriptors = 0

    mutating func value(of type: FuzzType, _ input: inout FuzzInput, depth: Int) -> DBusValue {
        budget -= 1
        switch type {
        case .basic(let code):
            return basic(code, &input)
        case .array(let element):
            guard let elementSignature = try? DBusSignature(element.signature) else {
                // Not expressible through the package API (too deep or too long).
                return .bytes([])
            }
            if case .basic(let code) = element, code == UInt8(ascii: "y"), input.oneIn(2) {
                return .bytes(budget > 0 ? input.take(input.below(64)) : [])
            }
            let count = budget > 0 ? input.below(4) : 0
            var elements = (0..<count).map { _ in value(of: element, &input, depth: depth + 1) }
            if input.oneIn(24) {
                var generator = FuzzTypeGenerator(strict: false, allowFD: false)
                elements.append(value(of: generator.make(&input), &input, depth: depth + 1))
            }
            var signature = elementSignature
            if input.oneIn(32), let other = try? DBusSignature(FuzzText.string(&input)) { signature = other }
            return .array(element: signature, elements)
        case .dictionary(let key, let valueType):
            var keySignature = DBusSignature(stringLiteral: String(UnicodeScalar(key)))
            guard let valueSignature = try? DBusSignature(valueType.signature) else { return .bytes([]) }
            if input.oneIn(32) {
                keySignature = ["v", "ay", "(i)", "a{sv}", "yy"][input.below(5)]
            }
            let count = budget > 0 ? input.below(4) : 0
            let entries = (0..<count).map { _ in
                DBusValue.DictionaryEntry(basic(key, &input), value(of: valueType, &input, depth: depth + 2))
            }
            return .dictionary(key: keySignature, value: valueSignature, entries)
        case .structure(let fields):
            if input.oneIn(64) { return .structure([]) }
            return .structure(fields.map { value(of: $0, &input, depth: depth + 1) })
        case .variant:
            // A little beyond the 64-container limit, for validation to reject.
            var generator = FuzzTypeGenerator(strict: false, allowFD: descriptors < 4, maxNesting: 72 - depth)
            let inner = depth < 71 && budget > 0 ? generator.make(&input) : .basic(UInt8(ascii: "y"))
            return .variant(value(of: inner, &input, depth: depth + 1))
        }
    }

    mutating func basic(_ code: UInt8, _ input: inout FuzzInput) -> DBusValue {
        switch code {
        case UInt8(ascii: "y"): return .byte(input.byte())
        case UInt8(ascii: "b"): return .bool(input.oneIn(2))
        case UInt8(ascii: "n"): return .int16(Int16(bitPattern: input.uint16()))
        case UInt8(ascii: "q"): return .uint16(input.uint16())
        case UInt8(ascii: "i"): return .int32(Int32(bitPattern: input.uint32()))
        case UInt8(ascii: "u"): return .uint32(input.uint32())
        case UInt8(ascii: "x"): return .int64(Int64(bitPattern: input.uint64()))
        case UInt8(ascii: "t"): return .uint64(input.uint64())
        case UInt8(ascii: "d"): return .double(Double(bitPattern: input.uint64()))
        case UInt8(ascii: "h"):
            // An unusable descriptor anywhere: found here as KNOWN-2 (append threw out of an
            // open libdbus container, which leaked); validation now rejects it before appending.
            let unusable = input.oneIn(16) || descriptors >= 4
            if unusable { return .unixFD(UnixFileDescriptor(owning: -1)) }
            descriptors += 1
            return .unixFD(UnixFileDescriptor(owning: dup(fuzzDevNull)))
        case UInt8(ascii: "o"):
            let text = input.oneIn(16) ? FuzzText.string(&input) : FuzzText.objectPath(&input)
            return .objectPath((try? ObjectPath(text)) ?? .root)
        case UInt8(ascii: "g"):
            var generator = FuzzTypeGenerator(strict: false, allowFD: true)
            let text = input.oneIn(16) ? FuzzText.string(&input) : generator.make(&input).signature
            return .signature((try? DBusSignature(text)) ?? .empty)
        default:
            return .string(FuzzText.string(&input, allowNUL: input.oneIn(16)))
        }
    }
}
