// Generated D-Bus types, within or beyond libdbus's limits.

import CDBus

// MARK: - Generated types

/// A D-Bus type, generated before its values (an array needs its element signature first).
indirect enum FuzzType {
    case basic(UInt8)
    case array(FuzzType)
    case dictionary(UInt8, FuzzType)
    case structure([FuzzType])
    case variant

    var signature: String {
        switch self {
        case .basic(let code): return String(UnicodeScalar(code))
        case .array(let element): return "a" + element.signature
        case .dictionary(let key, let value): return "a{" + String(UnicodeScalar(key)) + value.signature + "}"
        case .structure(let fields): return "(" + fields.map(\.signature).joined() + ")"
        case .variant: return "v"
        }
    }

    var fuzzContainsFD: Bool {
        switch self {
        case .basic(let code): return code == UInt8(ascii: "h")
        case .array(let element): return element.fuzzContainsFD
        case .dictionary(let key, let value): return key == UInt8(ascii: "h") || value.fuzzContainsFD
        case .structure(let fields): return fields.contains { $0.fuzzContainsFD }
        case .variant: return false
        }
    }
}

let fuzzBasicCodes: [UInt8] = Array("ybnqiuxtdsogh".utf8)

/// Builds types from input. `strict` keeps them within libdbus's limits (a
/// generator for libdbus's own append calls must never make libdbus abort);
/// otherwise types may go past the limits, to test our writer's validation.
struct FuzzTypeGenerator {
    var strict: Bool
    var allowFD: Bool
    /// Containers (arrays, dictionary entries, structures) the type may nest in all.
    var maxNesting = 64
    var nodes = 0

    mutating func make(_ input: inout FuzzInput) -> FuzzType {
        let type = make(&input, arrays: 0, structs: 0)
        guard strict else { return type }
        let signature = type.signature
        return Self.isValidSingle(signature) ? type : .basic(UInt8(ascii: "y"))
    }

    static func isValidSingle(_ signature: String) -> Bool {
        signature.withCString { dbus_signature_validate_single($0, nil) } != 0
    }

    private mutating func make(_ input: inout FuzzInput, arrays: Int, structs: Int) -> FuzzType {
        nodes += 1
        let maxDepth = strict ? 32 : 40
        let room = maxNesting - arrays - structs
        let exhausted = nodes > 48 || input.isExhausted || room < 1
        let choice = exhausted ? input.below(12) : input.below(22)
        switch choice {
        case 0..<12:
            return .basic(fuzzBasicCodes[choice])
        case 12:
            return .basic(allowFD ? UInt8(ascii: "h") : UInt8(ascii: "u"))
        case 13, 14, 15:
            guard arrays < maxDepth else { return .basic(UInt8(ascii: "y")) }
            return .array(make(&input, arrays: arrays + 1, structs: structs))
        case 16, 17:
            guard arrays < maxDepth, structs < maxDepth, room >= 2 else { return .basic(UInt8(ascii: "s")) }
            let key = fuzzBasicCodes[input.below(allowFD ? 13 : 12)]
            return .dictionary(key, make(&input, arrays: arrays + 1, structs: structs + 1))
        case 18, 19:
            guard structs < maxDepth else { return .basic(UInt8(ascii: "i")) }
            let count = 1 + input.below(4)
            return .structure((0..<count).map { _ in make(&input, arrays: arrays, structs: structs + 1) })
        case 20:
            return .variant
        default:
            // A deep or wide chain, to reach the limits (32 arrays, 32 structs, 255 characters).
            let depth = min(input.below(strict ? 33 : 41), room)
            var type: FuzzType = .basic(fuzzBasicCodes[input.below(12)])
            if input.oneIn(3) {
                let width = input.below(strict ? 120 : 300)
                type = .structure(Array(repeating: type, count: max(1, width)))
            }
            let useStructs = input.oneIn(2)
            for _ in 0..<depth {
                if useStructs {
                    guard structs + 1 < maxDepth else { break }
                    type = .structure([type])
                } else {
                    type = .array(type)
                }
            }
            return type
        }
    }
}
