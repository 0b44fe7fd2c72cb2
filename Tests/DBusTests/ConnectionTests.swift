import Testing

@testable import DBus

@Suite(.timeLimit(.minutes(5))) struct ConnectionTests {
    @Test func connectsAndGetsAUniqueName() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        let name = try #require(connection.uniqueName)
        #expect(name.isUnique)
        let owner = try await connection.nameOwner(of: "org.freedesktop.DBus")
        #expect(owner == "org.freedesktop.DBus")
        connection.close()
        #expect(!connection.isOpen)
    }
}
