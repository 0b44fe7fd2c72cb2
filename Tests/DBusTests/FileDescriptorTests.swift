import Testing

@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// Unix file descriptors (`h`) in messages, both directions, and who owns them.
///
/// Pipes are made close-on-exec (a test bus spawned meanwhile must not inherit
/// them) and read for an exact byte count, never to end of file.
@Suite(.timeLimit(.minutes(5))) struct FileDescriptorTests {
    /// A close-on-exec pipe: (read end, write end).
    static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw DBusError(.failed, "pipe failed: \(errno)") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    static func write(_ text: String, to fd: Int32) -> Bool {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
    }

    /// Reads exactly `count` bytes (blocking; the writer has written them already or is about to).
    static func read(_ count: Int, from fd: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: count)
        while bytes.count < count {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count - bytes.count) }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    @Test func takeMovesTheDescriptorOut() throws {
        let (r, w) = try Self.makePipe()
        defer { close(r) }
        let descriptor = UnixFileDescriptor(owning: w)
        #expect(descriptor.rawValue == w)
        let taken = descriptor.take()
        #expect(taken == w)
        #expect(descriptor.rawValue == -1)
        #expect(descriptor.take() == -1)
        descriptor.close()  // nothing left to close: the taken descriptor stays open
        #expect(Self.isOpen(taken))
        #expect(Self.write("x", to: taken))
        close(taken)
        // A descriptor that was taken cannot be sent.
        #expect(throws: DBusError.self) { try localCall([.unixFD(descriptor)]) }
    }

    @Test func readingAMessageGivesAFreshDuplicate() throws {
        let (r, w) = try Self.makePipe()
        defer { close(r) }
        let sent = UnixFileDescriptor(owning: w)
        let message = try localCall([.unixFD(sent), .string("after")])
        #expect(message.signature == "hs")
        // The message holds its own copy: the original can go.
        sent.close()
        let arguments = try message.arguments()
        let received = try #require(arguments.first?.unixFDValue)
        #expect(received.rawValue >= 0)
        #expect(arguments.last == .string("after"))
        #expect(Self.write("dup", to: received.rawValue))
        #expect(Self.read(3, from: r) == "dup")
        // Each read of the body is another duplicate, owned by its reader.
        let again = try #require(try message.arguments().first?.unixFDValue)
        #expect(again.rawValue != received.rawValue)
        received.close()
        #expect(received.rawValue == -1)
        #expect(Self.write("two", to: again.rawValue))
        #expect(Self.read(3, from: r) == "two")
    }

    @Test func descriptorInACallIsUsedByTheHandler() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        #expect(server.canPassFileDescriptors)
        #expect(client.canPassFileDescriptors)
        let write = DBusMethod("WriteTo", in: "hs", out: "b") { invocation in
            guard let args = try? invocation.arguments(), let fd = args[0].unixFDValue, let text = args[1].stringValue
            else { return invocation.reply(error: DBusError(.invalidArgs, "bad arguments")) }
            let ok = Self.write(text, to: fd.rawValue)
            fd.close()
            invocation.reply([.bool(ok)])
        }
        try await server.export([DBusInterface(testInterface, methods: [write])], at: path("/fd"))
        let (r, w) = try Self.makePipe()
        defer { close(r) }
        let reply = try await client.call(
            destination: server.uniqueName, path: path("/fd"), interface: testInterface, member: "WriteTo",
            arguments: [.unixFD(UnixFileDescriptor(owning: w)), .string("hello through the bus")])
        #expect(reply == [.bool(true)])
        #expect(Self.read(21, from: r) == "hello through the bus")
    }

    @Test func descriptorInAReplyIsOwnedByTheCaller() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let open = DBusMethod("Open", out: "h") { invocation in
            do {
                let (r, w) = try Self.makePipe()
                _ = Self.write("pong", to: w)
                close(w)
                invocation.reply([.unixFD(UnixFileDescriptor(owning: r))])
            } catch {
                invocation.reply(error: DBusError(.failed, "pipe"))
            }
        }
        try await server.export([DBusInterface(testInterface, methods: [open])], at: path("/fd"))
        let reply = try await client.call(
            destination: server.uniqueName, path: path("/fd"), interface: testInterface, member: "Open")
        let descriptor = try #require(reply.first?.unixFDValue)
        let fd = descriptor.take()
        #expect(fd >= 0)
        #expect(descriptor.rawValue == -1)
        defer { close(fd) }
        #expect(Self.read(4, from: fd) == "pong")
    }

    @Test func descriptorsRoundTripThroughTheEcho() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.exportEcho()
        let (r, w) = try Self.makePipe()
        defer { close(r) }
        let reply = try await client.echo(
            [.array(element: "h", [.unixFD(UnixFileDescriptor(owning: w))]), .variant(.string("v"))], via: server)
        let back = try #require(reply.first?.arrayValue?.first?.unixFDValue)
        #expect(reply.last == .variant(.string("v")))
        #expect(Self.write("echo", to: back.rawValue))
        #expect(Self.read(4, from: r) == "echo")
    }
}
