// What the oracles need to know about a DBusValue: its normal form, nesting, descriptors,
// and structural equality.

extension DBusValue {
    /// The value as it reads back from a message: `ay` is always `.bytes`.
    var fuzzNormalized: DBusValue {
        switch self {
        case .array(let element, let elements):
            if element.rawValue == "y" {
                return .bytes(elements.map { if case .byte(let b) = $0 { return b } else { return 0 } })
            }
            return .array(element: element, elements.map(\.fuzzNormalized))
        case .dictionary(let key, let value, let entries):
            return .dictionary(
                key: key, value: value, entries.map { DictionaryEntry($0.key.fuzzNormalized, $0.value.fuzzNormalized) })
        case .structure(let fields): return .structure(fields.map(\.fuzzNormalized))
        case .variant(let inner): return .variant(inner.fuzzNormalized)
        default: return self
        }
    }

    /// Nesting as libdbus's body validator counts it (at most 64 is valid): arrays,
    /// dictionary entries, structures and variants count, but an array of fixed-size
    /// values is checked in bulk, without descending into it.
    var fuzzLibdbusNesting: Int {
        switch self {
        case .bytes: return 0
        case .array(let element, let elements):
            if "ybnqiuxtdh".contains(element.rawValue), element.rawValue.count == 1 { return 0 }
            return 1 + (elements.map(\.fuzzLibdbusNesting).max() ?? 0)
        case .dictionary(_, _, let entries):
            return 2 + (entries.map { max($0.key.fuzzLibdbusNesting, $0.value.fuzzLibdbusNesting) }.max() ?? 0)
        case .structure(let fields): return 1 + (fields.map(\.fuzzLibdbusNesting).max() ?? 0)
        case .variant(let inner): return 1 + inner.fuzzLibdbusNesting
        default: return 0
        }
    }

    /// The containers on the way to the most deeply nested value, as type codes
    /// ("a{" is an array of dictionary entries, counted as two levels), then the value's code.
    var fuzzDeepestChain: String {
        func chain(_ value: DBusValue) -> [String] {
            switch value {
            case .array(_, let elements):
                return ["a"] + (elements.map(chain).max { $0.count < $1.count } ?? [])
            case .dictionary(_, _, let entries):
                let deepest = entries.flatMap { [chain($0.key), chain($0.value)] }.max { $0.count < $1.count } ?? []
                return ["a", "{"] + deepest
            case .structure(let fields): return ["("] + (fields.map(chain).max { $0.count < $1.count } ?? [])
            case .variant(let inner): return ["v"] + chain(inner)
            default: return [value.signatureString]
            }
        }
        let links = chain(self)
        return "\(links.count - 1) containers: " + links.joined()
    }

    /// Whether a descriptor is anywhere inside (such a message has no wire form for fuzzDemarshal).
    var fuzzContainsFD: Bool {
        switch self {
        case .unixFD: return true
        case .array(_, let elements): return elements.contains { $0.fuzzContainsFD }
        case .dictionary(_, _, let entries):
            return entries.contains { $0.key.fuzzContainsFD || $0.value.fuzzContainsFD }
        case .structure(let fields): return fields.contains { $0.fuzzContainsFD }
        case .variant(let inner): return inner.fuzzContainsFD
        default: return false
        }
    }

    /// A descriptor that cannot be appended (taken, closed or never valid).
    var fuzzContainsUnusableFD: Bool {
        switch self {
        case .unixFD(let fd): return fd.rawValue < 0
        case .array(_, let elements): return elements.contains { $0.fuzzContainsUnusableFD }
        case .dictionary(_, _, let entries):
            return entries.contains { $0.key.fuzzContainsUnusableFD || $0.value.fuzzContainsUnusableFD }
        case .structure(let fields): return fields.contains { $0.fuzzContainsUnusableFD }
        case .variant(let inner): return inner.fuzzContainsUnusableFD
        default: return false
        }
    }
}

// MARK: - Value equality for the oracles

/// Structural equality where doubles compare by bit pattern (NaN round-trips)
/// and descriptors only by kind (a received descriptor is a fresh duplicate).
func fuzzSameValue(_ a: DBusValue, _ b: DBusValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.unixFD, .unixFD): return true
    case (.array(let e1, let v1), .array(let e2, let v2)): return e1 == e2 && fuzzSameValues(v1, v2)
    case (.dictionary(let k1, let t1, let v1), .dictionary(let k2, let t2, let v2)):
        return k1 == k2 && t1 == t2 && v1.count == v2.count
            && zip(v1, v2).allSatisfy { fuzzSameValue($0.key, $1.key) && fuzzSameValue($0.value, $1.value) }
    case (.structure(let f1), .structure(let f2)): return fuzzSameValues(f1, f2)
    case (.variant(let x), .variant(let y)): return fuzzSameValue(x, y)
    default: return a == b
    }
}

func fuzzSameValues(_ a: [DBusValue], _ b: [DBusValue]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { fuzzSameValue($0, $1) }
}
