import Testing

@testable import DBus

/// Values written into a real `DBusMessage` and read back, first without a bus,
/// then through one (an exported echo that answers with its arguments).
@Suite(.timeLimit(.minutes(5))) struct ValueRoundTripTests {
    /// One value of every basic type but `h` (file descriptors compare by identity; see FileDescriptorTests).
    static let basics: [DBusValue] = [
        .byte(0), .byte(255), .bool(true), .bool(false),
        .int16(.min), .int16(.max), .uint16(.max), .int32(.min), .int32(-1), .uint32(.max),
        .int64(.min), .int64(.max), .uint64(.max), .uint64(0),
        .double(3.141_592_653_589_793), .double(-0.0), .double(.infinity), .double(-.greatestFiniteMagnitude),
        .string(""), .string("héllo wörld ✓ 🎧"), .objectPath(.root), .signature(.empty), .signature("a{sv}"),
    ]

    static let containers: [DBusValue] = [
        .bytes([]), .bytes([0, 1, 2, 254, 255]),
        .array(element: "i", [.int32(1), .int32(-2), .int32(3)]),
        .array(element: "s", []),
        .array(element: "a{sv}", []),
        .array(element: "ay", [.bytes([1, 2]), .bytes([])]),
        .array(element: "(is)", [.structure([.int32(1), .string("one")]), .structure([.int32(2), .string("two")])]),
        .array(element: "v", [.variant(.int32(1)), .variant(.string("x")), .variant(.bytes([9]))]),
        .array(element: "o", [.objectPath(.root)]),
        .stringVariantDictionary([:]),
        .stringVariantDictionary([
            "Name": .string("dev"), "RSSI": .int16(-60), "UUIDs": .stringArray(["180d", "180f"]),
            "ManufacturerData": .dictionary(key: "q", value: "v", [.init(.uint16(0x004c), .variant(.bytes([1, 2])))]),
        ]),
        .dictionary(key: "y", value: "s", [.init(.byte(1), .string("a")), .init(.byte(2), .string("b"))]),
        .dictionary(key: "o", value: "a{sa{sv}}", []),
        .structure([.int32(1), .string("s"), .bytes([1]), .variant(.bool(true)), .stringArray([])]),
        .structure([.structure([.structure([.uint64(1)])])]),
        .variant(.variant(.variant(.string("deep")))),
        .variant(.stringVariantDictionary(["k": .array(element: "i", [])])),
    ]

    /// The `GetManagedObjects` shape, `a{oa{sa{sv}}}`, with an empty interface map on one object.
    static func managedObjects() throws -> DBusValue {
        .dictionary(
            key: "o", value: "a{sa{sv}}",
            [
                .init(
                    .objectPath(try path("/org/bluez/hci0")),
                    .dictionary(
                        key: "s", value: "a{sv}",
                        [
                            .init(.string("org.bluez.Adapter1"), .stringVariantDictionary(["Powered": .bool(true)])),
                            .init(.string("org.freedesktop.DBus.Properties"), .stringVariantDictionary([:])),
                        ])),
                .init(.objectPath(try path("/org/bluez/hci0/dev_AA")), .dictionary(key: "s", value: "a{sv}", [])),
            ])
    }

    static func nested() -> [DBusValue] {
        [
            Nesting.variants(30), Nesting.structs(30), Nesting.arrays(30),
            Nesting.arrays(30, around: .stringVariantDictionary(["x": Nesting.variants(10)])),
            Nesting.arrays(0, around: .array(element: "i", [])),
            // Mixed to the limit: 64 containers in all.
            Nesting.variants(34, around: Nesting.structs(15, around: Nesting.arrays(15))),
        ]
    }

    @Test func basicTypesRoundTripThroughAMessage() throws {
        for value in Self.basics {
            let back = try localCall([value]).arguments()
            #expect(back == [value], "\(value)")
        }
        // All at once, in one body.
        #expect(try localCall(Self.basics).arguments() == Self.basics)
    }

    @Test func messageSignatureIsTheConcatenationOfTheArguments() throws {
        let message = try localCall([.byte(1), .stringArray([]), .stringVariantDictionary([:]), .variant(.int32(1))])
        #expect(message.signature == "yasa{sv}v")
        #expect(try localCall([]).signature == .empty)
        #expect(try localCall([]).arguments().isEmpty)
    }

    @Test func notANumberSurvives() throws {
        let back = try localCall([.double(.nan)]).arguments()
        #expect(back.first?.doubleValue?.isNaN == true)
    }

    @Test func containersRoundTrip() throws {
        for value in Self.containers + [try Self.managedObjects()] {
            let back = try localCall([value]).arguments()
            #expect(back == [value], "\(value.signature)")
            #expect(back.first?.signature == value.signature)
        }
    }

    @Test func emptyContainersKeepTheirElementSignatures() throws {
        let empties: [DBusValue] = [
            .array(element: "a{oa{sa{sv}}}", []), .dictionary(key: "o", value: "a{sa{sv}}", []),
            .array(element: "(ayv)", []), .stringVariantDictionary([:]), .bytes([]),
        ]
        let back = try localCall(empties).arguments()
        #expect(back.map(\.signature.rawValue) == ["aa{oa{sa{sv}}}", "a{oa{sa{sv}}}", "a(ayv)", "a{sv}", "ay"])
        #expect(back == empties)
    }

    @Test func nestedValuesRoundTrip() throws {
        for value in Self.nested() {
            #expect(try localCall([value]).arguments() == [value], "\(value.signature)")
        }
    }

    @Test func byteArraysReadBackAsBytes() throws {
        // `ay` always decodes to `.bytes`, however it was built.
        let back = try localCall([.array(element: "y", [.byte(1), .byte(2)])]).arguments()
        #expect(back == [.bytes([1, 2])])
    }

    @Test func accessorsReadThroughVariants() throws {
        let values = try localCall([
            .variant(.variant(.string("s"))), .variant(.stringArray(["a", "b"])),
            .variant(.stringVariantDictionary(["k": .uint32(5)])), .variant(.bytes([7])),
        ]).arguments()
        #expect(values[0].stringValue == "s")
        #expect(values[1].stringArrayValue == ["a", "b"])
        #expect(values[2].stringKeyedDictionary?["k"]?.uint32Value == 5)
        #expect(values[3].bytesValue == [7])
        #expect(values[0].int32Value == nil)
    }

    @Test func signalBodiesRoundTrip() throws {
        let signal = try DBusMessage.signal(
            path: path("/s"), interface: testInterface, member: "Changed", arguments: Self.containers)
        #expect(signal.kind == .signal)
        #expect(try signal.arguments() == Self.containers)
    }

    // MARK: Through the bus

    @Test func everyValueRoundTripsThroughTheBus() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.exportEcho()
        for value in Self.basics + Self.containers + Self.nested() + [try Self.managedObjects(), .double(.nan)] {
            let back = try await client.echo([value], via: server)
            if value.doubleValue?.isNaN == true {
                #expect(back.first?.doubleValue?.isNaN == true)
            } else {
                #expect(back == [value], "\(value.signature)")
            }
        }
        #expect(try await client.echo(Self.basics, via: server) == Self.basics)
        #expect(try await client.echo([], via: server) == [])
    }

    @Test func typedEchoMethodChecksAndReturnsItsSignature() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let signature: DBusSignature = "a{oa{sa{sv}}}ya(is)v"
        let method = DBusMethod("Echo", in: signature, out: signature) { invocation in
            invocation.reply((try? invocation.arguments()) ?? [])
        }
        try await server.export([DBusInterface(testInterface, methods: [method])], at: path("/typed"))
        let arguments: [DBusValue] = [
            try Self.managedObjects(), .byte(3), .array(element: "(is)", [.structure([.int32(1), .string("x")])]),
            .variant(.stringVariantDictionary(["a": .bool(false)])),
        ]
        let reply = try await client.call(
            destination: server.uniqueName, path: path("/typed"), interface: testInterface, member: "Echo",
            arguments: arguments)
        #expect(reply == arguments)
    }
}
