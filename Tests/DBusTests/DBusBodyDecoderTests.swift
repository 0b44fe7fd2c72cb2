import TestSupport
import Testing

@testable import DBus

/// `DBusBodyDecoder` against libdbus's own reader (`DBusMessage.arguments()`):
/// the same values for every shape, in both byte orders, and an error — never a
/// trap or a read past the buffer — for hostile bodies.
@Suite(.timeLimit(.minutes(5))) struct DBusBodyDecoderTests {
    // MARK: Helpers

    /// The body bytes of a (little-endian, libdbus-made) message and its byte order.
    static func body(of message: DBusMessage) throws -> (bytes: [UInt8], bigEndian: Bool) {
        let wire = try message.marshalled()
        let (offset, length, bigEndian) = try wire.withUnsafeBytes { (buffer) throws -> (Int, Int, Bool) in
            try DBusMessage.bodyRange(buffer)
        }
        return (Array(wire[offset..<offset + length]), bigEndian)
    }

    /// Checks that both decoders give `values` for a message carrying them.
    static func expectRoundTrip(_ values: [DBusValue], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let message = try localCall(values)
        let viaIter = try message.arguments()
        let viaBytes = try message.decodedArguments()
        #expect(viaIter == values, sourceLocation: sourceLocation)
        #expect(viaBytes == viaIter, sourceLocation: sourceLocation)
        // Our own marshaller, in both byte orders, decodes to the same values too.
        let signature = message.signature.rawValue
        let (libdbusBody, _) = try body(of: message)
        var little = TestMarshaller(bigEndian: false)
        for value in values { little.write(value) }
        #expect(
            little.bytes == libdbusBody, "the test marshaller disagrees with libdbus", sourceLocation: sourceLocation)
        var big = TestMarshaller(bigEndian: true)
        for value in values { big.write(value) }
        #expect(
            try DBusBodyDecoder.decode(body: big.bytes, signature: signature, bigEndian: true) == values,
            sourceLocation: sourceLocation)
    }

    static func decode(_ bytes: [UInt8], _ signature: String, bigEndian: Bool = false) throws(DBusError) -> [DBusValue]
    {
        try DBusBodyDecoder.decode(body: bytes, signature: signature, bigEndian: bigEndian)
    }

    // MARK: Same values as libdbus

    @Test func basicsAndContainersRoundTrip() throws {
        for value in ValueRoundTripTests.basics + ValueRoundTripTests.containers {
            try Self.expectRoundTrip([value])
        }
        try Self.expectRoundTrip(ValueRoundTripTests.basics)
        try Self.expectRoundTrip(ValueRoundTripTests.containers)
        try Self.expectRoundTrip([try ValueRoundTripTests.managedObjects()])
        try Self.expectRoundTrip([])
    }

    @Test func deepNestingRoundTrips() throws {
        for value in ValueRoundTripTests.nested() { try Self.expectRoundTrip([value]) }
        try Self.expectRoundTrip([Nesting.arrays(31, around: .bytes([1, 2, 3]))])
        try Self.expectRoundTrip([Nesting.structs(31)])
        try Self.expectRoundTrip([Nesting.variants(60)])
        // libdbus limits 32 arrays in a row, not 32 in all: 40 arrays, each around a struct.
        var alternating: DBusValue = .int32(7)
        for _ in 0..<20 {
            alternating = .structure([alternating])
            alternating = .array(element: alternating.signature, [alternating])
        }
        try Self.expectRoundTrip([alternating])
        var dictionaries: DBusValue = .int32(7)
        for _ in 0..<20 {
            dictionaries = .dictionary(key: "s", value: dictionaries.signature, [.init(.string("k"), dictionaries)])
        }
        try Self.expectRoundTrip([.structure([dictionaries])])
    }

    @Test(arguments: 0..<8) func randomValuesRoundTrip(seed: UInt64) throws {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9 &+ 1)
        for _ in 0..<60 {
            let count = random.below(4) + 1
            let values = (0..<count).map { _ in RandomValue.make(&random, depth: 0) }
            try Self.expectRoundTrip(values)
        }
    }

    @Test func bigEndianMessageFromTheWireDecodesAsLibdbusReadsIt() throws {
        // A big-endian signal built by hand: libdbus keeps its byte order.
        let values: [DBusValue] = [
            .uint32(0x0102_0304), .string("héllo"), .stringVariantDictionary(["RSSI": .int16(-60), "X": .double(1.5)]),
            .array(element: "(qt)", [.structure([.uint16(7), .uint64(1 << 40)])]),
        ]
        var body = TestMarshaller(bigEndian: true)
        for value in values { body.write(value) }
        let signature = values.map(\.signatureString).joined()
        var header = TestMarshaller(bigEndian: true)
        header.bytes = [UInt8(ascii: "B"), 4, 0, 1]  // signal, version 1
        header.write(.uint32(UInt32(body.bytes.count)))
        header.write(.uint32(9))  // serial
        header.write(
            .array(
                element: "(yv)",
                [
                    .structure([.byte(1), .variant(.objectPath(try path("/a")))]),
                    .structure([.byte(2), .variant(.string("com.example.I"))]),
                    .structure([.byte(3), .variant(.string("S"))]),
                    .structure([.byte(8), .variant(.signature(try DBusSignature(signature)))]),
                ]))
        while header.bytes.count % 8 != 0 { header.bytes.append(0) }
        let message = try DBusMessage.demarshal(header.bytes + body.bytes)
        #expect(try message.arguments() == values)
        #expect(try message.decodedArguments() == values)
    }

    @Test func managedObjectsMatchesTheGeneralPath() throws {
        let tree = try ValueRoundTripTests.managedObjects()
        let message = try localCall([tree])
        let decoded = try message.managedObjects()
        var expected: [ObjectPath: [String: [String: DBusValue]]] = [:]
        for entry in try #require(tree.dictionaryEntries) {
            var interfaces: [String: [String: DBusValue]] = [:]
            for interface in try #require(entry.value.dictionaryEntries) {
                interfaces[try #require(interface.key.stringValue)] =
                    try #require(interface.value.stringKeyedDictionary).mapValues(\.unwrappingVariants)
            }
            expected[try #require(entry.key.objectPathValue)] = interfaces
        }
        #expect(decoded == expected)
        #expect(decoded[try path("/org/bluez/hci0")]?["org.bluez.Adapter1"]?["Powered"] == .bool(true))
        // Another signature is refused.
        #expect(throws: DBusError.self) { try localCall([.stringVariantDictionary([:])]).managedObjects() }
    }

    @Test func managedObjectsKeepsTheLastDuplicate() throws {
        let entry = { (value: Int32) in
            DBusValue.DictionaryEntry(
                .objectPath(.root),
                .dictionary(
                    key: "s", value: "a{sv}",
                    [
                        .init(
                            .string("I"),
                            .dictionary(
                                key: "s", value: "v",
                                [
                                    .init(.string("P"), .variant(.int32(value))),
                                    .init(.string("P"), .variant(.variant(.int32(value + 1)))),
                                ]))
                    ]))
        }
        let message = try localCall([.dictionary(key: "o", value: "a{sa{sv}}", [entry(1), entry(10)])])
        #expect(try message.managedObjects() == [.root: ["I": ["P": .int32(11)]]])
    }

    @Test func fileDescriptorsAreLeftToLibdbus() throws {
        #expect(throws: DBusError.self) { try Self.decode([0, 0, 0, 0], "h") }
    }

    // MARK: Hostile bodies

    @Test func everyTruncationIsAnError() throws {
        let values: [DBusValue] = [
            try ValueRoundTripTests.managedObjects(), .string("tail"), .variant(.bytes([1, 2, 3])),
            .structure([.uint64(1), .double(2)]),
        ]
        let message = try localCall(values)
        let (bytes, _) = try Self.body(of: message)
        let signature = message.signature.rawValue
        for length in 0..<bytes.count {
            #expect(throws: DBusError.self) { try Self.decode(Array(bytes[0..<length]), signature) }
        }
        #expect(try Self.decode(bytes, signature) == values)
        #expect(throws: DBusError.self) { try Self.decode(bytes + [0], signature) }
    }

    @Test func malformedValuesAreErrors() {
        let cases: [(String, [UInt8], String)] = [
            ("boolean 2", [2, 0, 0, 0], "b"),
            ("string without NUL", [1, 0, 0, 0, 0x41, 0x42], "s"),
            ("NUL inside a string", [2, 0, 0, 0, 0x41, 0, 0], "s"),
            ("invalid UTF-8", [2, 0, 0, 0, 0xC3, 0x28, 0], "s"),
            ("surrogate", [3, 0, 0, 0, 0xED, 0xA0, 0x80, 0], "s"),
            ("overlong", [2, 0, 0, 0, 0xC0, 0x80, 0], "s"),
            ("string length past the end", [0xFF, 0xFF, 0xFF, 0xFF, 0], "s"),
            ("relative object path", [1, 0, 0, 0, 0x61, 0], "o"),
            ("object path with //", [2, 0, 0, 0, 0x2F, 0x2F, 0], "o"),
            ("object path with trailing /", [3, 0, 0, 0, 0x2F, 0x61, 0x2F, 0], "o"),
            ("invalid signature value", [1, 0x61, 0], "g"),
            ("variant of two types", [2, 0x69, 0x69, 0, 0, 0, 0, 0, 1, 0, 0, 0], "v"),
            ("variant of nothing", [0, 0], "v"),
            ("variant of a bad code", [1, 0x7A, 0, 0], "v"),
            ("array longer than 64 MiB", [0, 0, 0, 0x10, 0], "ai"),
            ("array past the end", [8, 0, 0, 0, 1, 0, 0, 0], "ai"),
            ("element crossing the array end", [6, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0], "ai"),
            ("non-zero padding", [1, 7, 0, 0, 5, 0, 0, 0], "yu"),
            ("non-zero array padding", [0, 0, 0, 0, 1, 0, 0, 0], "at"),
            ("trailing bytes", [1, 0, 0, 0, 9], "u"),
            ("dictionary key not basic", [], "a{vs}"),
            ("unterminated struct", [], "(i"),
            ("empty struct", [], "()"),
            ("dict entry outside an array", [], "{ss}"),
        ]
        for (what, bytes, signature) in cases {
            #expect(throws: DBusError.self, "\(what)") { try Self.decode(bytes, signature) }
            #expect(throws: DBusError.self, "\(what), big-endian") {
                try Self.decode(bytes, signature, bigEndian: true)
            }
        }
    }

    @Test func deepVariantNestingIsAnErrorNotAStackOverflow() {
        // 10,000 variants inside each other, each "v" signature then the next.
        var bytes: [UInt8] = []
        for _ in 0..<10_000 { bytes += [1, UInt8(ascii: "v"), 0] }
        bytes += [1, UInt8(ascii: "y"), 0, 7]
        #expect(throws: DBusError.self) { try Self.decode(bytes, "v") }
        // Arrays nested past the signature limit.
        #expect(throws: DBusError.self) { try Self.decode([], String(repeating: "a", count: 33) + "i") }
        #expect(throws: DBusError.self) {
            try Self.decode([], String(repeating: "(", count: 33) + "i" + String(repeating: ")", count: 33))
        }
    }

    /// Bytes flipped at random in valid bodies: whenever libdbus accepts the
    /// message, both decoders agree; whenever libdbus rejects it, so do we.
    @Test(arguments: 0..<4) func corruptedBodiesAgreeWithLibdbus(seed: UInt64) throws {
        var random = SplitMix64(seed: seed &+ 1000)
        var accepted = 0
        var rejected = 0
        for _ in 0..<150 {
            let values = (0..<(random.below(3) + 1)).map { _ in RandomValue.make(&random, depth: 0) }
            let call = try localCall(values)
            call.setSerial(1)  // libdbus refuses to demarshal a message with serial 0
            let wire = try call.marshalled()
            let (offset, length, _) = try wire.withUnsafeBytes { (buffer) throws -> (Int, Int, Bool) in
                try DBusMessage.bodyRange(buffer)
            }
            guard length > 0 else { continue }
            var corrupted = wire
            for _ in 0..<(random.below(3) + 1) {
                let at = offset + random.below(length)
                corrupted[at] = random.below(3) == 0 ? 0 : corrupted[at] ^ UInt8(truncatingIfNeeded: random.next() | 1)
            }
            let signature = call.signature.rawValue
            let ours = Result { () throws(DBusError) in
                try Self.decode(Array(corrupted[offset..<offset + length]), signature)
            }
            if let message = try? DBusMessage.demarshal(corrupted) {
                accepted += 1
                let theirs = try message.arguments()
                #expect(try ours.get() == theirs, "accepted by libdbus: \(corrupted)")
                #expect(try message.decodedArguments() == theirs)
            } else {
                rejected += 1
                #expect(throws: DBusError.self, "rejected by libdbus: \(corrupted)") { try ours.get() }
            }
        }
        #expect(accepted > 0)
        #expect(rejected > 0)
    }
}

// MARK: - A reference marshaller (test only)

/// Marshals values by the D-Bus specification, in either byte order, so that
/// big-endian bodies can be made (libdbus writes only the machine's order).
struct TestMarshaller {
    let bigEndian: Bool
    var bytes: [UInt8] = []

    init(bigEndian: Bool) { self.bigEndian = bigEndian }

    mutating func pad(_ alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func integer<T: FixedWidthInteger>(_ value: T) {
        pad(MemoryLayout<T>.size)
        let ordered = bigEndian ? value.bigEndian : value.littleEndian
        withUnsafeBytes(of: ordered) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ text: String, short: Bool = false) {
        if short { bytes.append(UInt8(text.utf8.count)) } else { integer(UInt32(text.utf8.count)) }
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    static func alignment(_ signature: String) -> Int {
        switch signature.first {
        case "y", "g", "v": return 1
        case "n", "q": return 2
        case "x", "t", "d", "(", "{": return 8
        default: return 4
        }
    }

    mutating func array(elementSignature: String, _ body: (inout TestMarshaller) -> Void) {
        integer(UInt32(0))
        let lengthAt = bytes.count - 4
        pad(Self.alignment(elementSignature))
        let start = bytes.count
        body(&self)
        let length = UInt32(bytes.count - start)
        let ordered = bigEndian ? length.bigEndian : length.littleEndian
        withUnsafeBytes(of: ordered) { for (i, byte) in $0.enumerated() { bytes[lengthAt + i] = byte } }
    }

    mutating func write(_ value: DBusValue) {
        switch value {
        case .byte(let v): bytes.append(v)
        case .bool(let v): integer(UInt32(v ? 1 : 0))
        case .int16(let v): integer(v)
        case .uint16(let v): integer(v)
        case .int32(let v): integer(v)
        case .uint32(let v): integer(v)
        case .int64(let v): integer(v)
        case .uint64(let v): integer(v)
        case .double(let v): integer(v.bitPattern)
        case .string(let v): string(v)
        case .objectPath(let v): string(v.rawValue)
        case .signature(let v): string(v.rawValue, short: true)
        case .unixFD(let v): integer(v.rawValue)
        case .bytes(let v): array(elementSignature: "y") { $0.bytes += v }
        case .array(let element, let elements):
            array(elementSignature: element.rawValue) { m in for e in elements { m.write(e) } }
        case .dictionary(_, _, let entries):
            array(elementSignature: "{") { m in
                for entry in entries {
                    m.pad(8)
                    m.write(entry.key)
                    m.write(entry.value)
                }
            }
        case .structure(let fields):
            pad(8)
            for field in fields { write(field) }
        case .variant(let inner):
            string(inner.signatureString, short: true)
            write(inner)
        }
    }
}

// MARK: - Random values

/// Random well-formed values of every type but `h`, at most a few levels deep.
enum RandomValue {
    static let texts = ["", "a", "héllo", "org.bluez.Device1", "🎧 ✓", String(repeating: "x", count: 40)]

    static func basic(_ random: inout SplitMix64) -> DBusValue {
        switch random.below(13) {
        case 0: return .byte(UInt8(truncatingIfNeeded: random.next()))
        case 1: return .bool(random.below(2) == 0)
        case 2: return .int16(Int16(truncatingIfNeeded: random.next()))
        case 3: return .uint16(UInt16(truncatingIfNeeded: random.next()))
        case 4: return .int32(Int32(truncatingIfNeeded: random.next()))
        case 5: return .uint32(UInt32(truncatingIfNeeded: random.next()))
        case 6: return .int64(Int64(bitPattern: random.next()))
        case 7: return .uint64(random.next())
        case 8: return .double(Double(Int64(bitPattern: random.next() >> 11)) / 1024)
        case 9, 10: return .string(texts[random.below(texts.count)])
        case 11: return .objectPath(try! ObjectPath(["/", "/org", "/org/bluez/hci0/dev_AA_BB"][random.below(3)]))
        default: return .signature(try! DBusSignature(["", "s", "a{sv}", "(iay)v"][random.below(4)]))
        }
    }

    /// A value of the same type as `template` (for array elements and dictionary values).
    static func like(_ template: DBusValue, _ random: inout SplitMix64) -> DBusValue {
        switch template {
        case .byte: return .byte(UInt8(truncatingIfNeeded: random.next()))
        case .bool: return .bool(random.below(2) == 0)
        case .int16: return .int16(Int16(truncatingIfNeeded: random.next()))
        case .uint16: return .uint16(UInt16(truncatingIfNeeded: random.next()))
        case .int32: return .int32(Int32(truncatingIfNeeded: random.next()))
        case .uint32: return .uint32(UInt32(truncatingIfNeeded: random.next()))
        case .int64: return .int64(Int64(bitPattern: random.next()))
        case .uint64: return .uint64(random.next())
        case .double: return .double(Double(random.below(1000)) / 8)
        case .string: return .string(texts[random.below(texts.count)])
        case .bytes: return .bytes((0..<random.below(6)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case .variant: return .variant(make(&random, depth: 3))
        case .array(let element, let elements):
            guard let first = elements.first else { return template }
            return .array(element: element, (0..<random.below(3)).map { _ in like(first, &random) })
        case .dictionary(let key, let value, let entries):
            guard let first = entries.first else { return template }
            return .dictionary(
                key: key, value: value,
                (0..<random.below(3)).map { _ in .init(like(first.key, &random), like(first.value, &random)) })
        case .structure(let fields): return .structure(fields.map { like($0, &random) })
        default: return template
        }
    }

    static func make(_ random: inout SplitMix64, depth: Int) -> DBusValue {
        if depth >= 3 { return basic(&random) }
        switch random.below(9) {
        case 0, 1, 2: return basic(&random)
        case 3: return .bytes((0..<random.below(9)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case 4:
            let first = make(&random, depth: depth + 1)
            let count = random.below(4)
            // Byte arrays are `.bytes`, never `.array(element: "y", …)`: libdbus reads them so.
            if case .byte = first { return .bytes(count == 0 ? [] : [UInt8(truncatingIfNeeded: random.next())]) }
            return .array(
                element: first.signature, count == 0 ? [] : [first] + (1..<count).map { _ in like(first, &random) })
        case 5:
            let key = basic(&random)
            let value = make(&random, depth: depth + 1)
            let count = random.below(4)
            let entries =
                count == 0
                ? []
                : [DBusValue.DictionaryEntry(key, value)]
                    + (1..<count).map { _ in .init(like(key, &random), like(value, &random)) }
            return .dictionary(key: key.signature, value: value.signature, entries)
        case 6: return .structure((0..<(random.below(3) + 1)).map { _ in make(&random, depth: depth + 1) })
        case 7: return .variant(make(&random, depth: depth + 1))
        default:
            return .stringVariantDictionary(
                Dictionary(
                    (0..<random.below(4)).map { (texts[$0 + 1], make(&random, depth: depth + 1)) },
                    uniquingKeysWith: { a, _ in a }))
        }
    }
}
