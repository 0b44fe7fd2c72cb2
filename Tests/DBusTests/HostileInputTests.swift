import TestSupport
import Testing

@testable import DBus

/// What other processes on the bus may send us: wrong signatures, unknown
/// targets, huge and deeply nested bodies. Each becomes an error reply or is
/// decoded; the exported objects keep answering; nothing traps.
@Suite(.timeLimit(.minutes(5))) struct HostileInputTests {
    struct Fixture {
        let bus: TestBus
        let server: DBusConnection
        let peer: DBusConnection
        let handled = Collected<[DBusValue]>()

        init() async throws {
            bus = try TestBus()
            server = try await bus.connect("server")
            peer = try await bus.connect("peer")
            let handled = self.handled
            let methods = [
                DBusMethod("Take", in: "sa{sv}", out: "u") { invocation in
                    let args = (try? invocation.arguments()) ?? []
                    handled.append(args)
                    invocation.reply([.uint32(UInt32(args.count))])
                },
                DBusMethod("Variant", in: "v", out: "v") { invocation in
                    let args = (try? invocation.arguments()) ?? []
                    handled.append(args)
                    invocation.reply(args)
                },
                DBusMethod("Unmarshallable", out: "s") { invocation in invocation.reply([.string("a\u{0}b")]) },
            ]
            try await server.export([DBusInterface(testInterface, methods: methods)], at: path("/obj"))
        }

        func call(
            _ member: MemberName, _ arguments: [DBusValue] = [], interface: InterfaceName? = testInterface,
            at objectPath: String = "/obj"
        ) async throws -> [DBusValue] {
            let message = try DBusMessage.methodCall(
                destination: server.uniqueName, path: path(objectPath), interface: interface, member: member,
                arguments: arguments)
            return try await peer.call(message, timeout: .seconds(20)).arguments()
        }

        func code(
            _ member: MemberName, _ arguments: [DBusValue] = [], interface: InterfaceName? = testInterface,
            at objectPath: String = "/obj"
        ) async -> DBusError.Code? {
            do {
                _ = try await call(member, arguments, interface: interface, at: objectPath)
                return nil
            } catch { return (error as? DBusError)?.code ?? .other("\(error)") }
        }

        var good: [DBusValue] { [.string("x"), .stringVariantDictionary(["k": .int32(1)])] }
    }

    @Test func wrongSignaturesAreInvalidArgsAndTheObjectKeepsAnswering() async throws {
        let fixture = try await Fixture()
        let wrong: [[DBusValue]] = [
            [], [.string("x")], [.int32(1), .stringVariantDictionary([:])],
            [.string("x"), .stringVariantDictionary([:]), .string("extra")],
            [.string("x"), .dictionary(key: "s", value: "s", [])],
            [.variant(.string("x")), .stringVariantDictionary([:])],
        ]
        for arguments in wrong {
            #expect(await fixture.code("Take", arguments) == .invalidArgs, "\(arguments.map(\.signature))")
        }
        #expect(fixture.handled.count == 0)
        #expect(try await fixture.call("Take", fixture.good) == [.uint32(2)])
        #expect(fixture.handled.values == [fixture.good])
    }

    @Test func unknownTargetsGetTheRightErrors() async throws {
        let fixture = try await Fixture()
        #expect(await fixture.code("Nope") == .unknownMethod)
        #expect(await fixture.code("Take", fixture.good, interface: "com.example.Missing") == .unknownInterface)
        #expect(await fixture.code("Take", fixture.good, at: "/missing") == .unknownObject)
        #expect(await fixture.code("Take", fixture.good, at: "/obj/child") == .unknownObject)
        #expect(await fixture.code("Nope", interface: nil) == .unknownMethod)
        #expect(await fixture.code("Introspect", [.string("x")], interface: .introspectable) == .invalidArgs)
        #expect(await fixture.code("GetManagedObjects", interface: .objectManager) == .unknownInterface)
        // Without an interface, the member alone finds the method.
        #expect(try await fixture.call("Take", fixture.good, interface: nil) == [.uint32(2)])
        // Nothing above disturbed the object.
        #expect(try await fixture.call("Take", fixture.good) == [.uint32(2)])
    }

    @Test func unmarshallableReplyBecomesFailed() async throws {
        let fixture = try await Fixture()
        #expect(await fixture.code("Unmarshallable") == .failed)
        #expect(try await fixture.call("Take", fixture.good) == [.uint32(2)])
    }

    @Test func repliesToUnsentMessagesAreRefused() throws {
        let unsent = try localCall([])
        let error = #expect(throws: DBusError.self) { try DBusMessage.methodReturn(to: unsent) }
        #expect(error?.code == .invalidArgs)
        #expect(DBusMessage.errorReply(to: unsent, error: DBusError(.failed, "x")) == nil)
    }

    @Test func hugeArraysRoundTrip() async throws {
        let fixture = try await Fixture()
        try await fixture.server.exportEcho()
        let mebibyte = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(try await fixture.peer.echo([.bytes(mebibyte)], via: fixture.server) == [.bytes(mebibyte)])
        let strings = (0..<100_000).map { "item-\($0)" }
        let back = try await fixture.peer.echo([.stringArray(strings)], via: fixture.server)
        #expect(back.first?.stringArrayValue == strings)
        #expect(back.first?.signature == "as")
    }

    @Test func deepVariantChainsAreDecodedOrRefused() async throws {
        let fixture = try await Fixture()
        // The deepest chain the bus lets through (64 containers) is decoded.
        let deepest = Nesting.variants(63)
        #expect(try await fixture.call("Variant", [deepest]) == [deepest])
        let mixed = Nesting.variants(32, around: Nesting.structs(31))
        #expect(try await fixture.call("Variant", [mixed]) == [mixed])
        // Where it does not fit, it is refused with an error reply, not a crash.
        #expect(await fixture.code("Take", [deepest, .stringVariantDictionary([:])]) == .invalidArgs)
        #expect(
            await fixture.code("Set", [.string(testInterface.rawValue), .string("X"), deepest], interface: .properties)
                == .unknownProperty)
        // Deeper than that never leaves this process.
        let error = await #expect(throws: DBusError.self) { try await fixture.call("Variant", [Nesting.variants(65)]) }
        #expect(error?.code == .invalidArgs)
        #expect(fixture.peer.isOpen && fixture.server.isOpen)
        #expect(try await fixture.call("Take", fixture.good) == [.uint32(2)])
    }

    @Test func deepSignalBodiesAreDecodedByHandlers() async throws {
        let fixture = try await Fixture()
        let got = Collected<[DBusValue]>()
        let subscription = try await fixture.server.subscribe(DBusMatchRule(interface: testInterface, member: "Deep")) {
            got.append((try? $0.arguments()) ?? [])
        }
        let body: [DBusValue] = [
            Nesting.variants(64), Nesting.arrays(32), Nesting.structs(32),
            .stringVariantDictionary(["k": Nesting.variants(61)]),
        ]
        fixture.peer.emit(path: try path("/deep"), interface: testInterface, member: "Deep", arguments: body)
        try await waitUntil("the deep signal arrived") { got.count == 1 }
        #expect(got.values.first == body)
        subscription.cancel()
    }

    @Test func manyMalformedCallsInARowLeaveTheServerWorking() async throws {
        let fixture = try await Fixture()
        let codes = try await withThrowingTaskGroup(of: DBusError.Code?.self) { group in
            for i in 0..<200 {
                group.addTask {
                    switch i % 4 {
                    case 0: return await fixture.code("Take", [.uint64(UInt64(i))])
                    case 1: return await fixture.code(MemberName(trusted: "Missing\(i)"))
                    case 2: return await fixture.code("Take", fixture.good, at: "/x\(i)")
                    default: return await fixture.code("Variant", [.variant(.bytes(Array(repeating: 1, count: i)))])
                    }
                }
            }
            var codes: [DBusError.Code?] = []
            for try await code in group { codes.append(code) }
            return codes
        }
        let expected: [DBusError.Code] = [.invalidArgs, .unknownMethod, .unknownObject]
        for code in expected { #expect(codes.filter { $0 == code }.count == 50, "\(code)") }
        #expect(codes.filter { $0 == nil }.count == 50)
        #expect(try await fixture.call("Take", fixture.good) == [.uint32(2)])
    }
}
