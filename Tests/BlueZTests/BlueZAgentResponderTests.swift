import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// `BlueZAgent` with a responder: requests wait for its answer, `Cancel` ends them, and the
/// capability it registers with follows `setCapability`.
@Suite(.timeLimit(.minutes(5))) struct BlueZAgentResponderTests {
    static let device = DBusValue.objectPath(try! ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_24"))

    @Test func answersWithTheRespondersPasskeyAndRefusals() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        let asked = PosixMutex<[BlueZAgent.Request]>([])
        agent.setResponder { _, request, answer in
            guard let request else { return }
            asked.withLock { $0.append(request) }
            switch request {
            case .requestPasskey: answer(.passkey(42))
            case .confirmPasskey(let passkey): answer(passkey == 7 ? .accept : .reject)
            default: answer(.accept)
            }
        }
        try await agent.register()
        #expect(try await bus.callAgent(agent, "RequestPasskey", [Self.device]) == [.uint32(42)])
        #expect(try await bus.callAgent(agent, "RequestConfirmation", [Self.device, .uint32(7)]) == [])
        let refused = await #expect(throws: DBusError.self) {
            try await bus.callAgent(agent, "RequestConfirmation", [Self.device, .uint32(8)])
        }
        #expect(refused?.name == "org.bluez.Error.Rejected")
        #expect(asked.withLock { $0 } == [.requestPasskey, .confirmPasskey(7), .confirmPasskey(8)])
    }

    @Test func cancelEndsARequestTheResponderNeverAnswers() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        let cancelled = PosixMutex(false)
        let pending = PosixMutex<(@Sendable (BlueZAgent.Answer) -> Void)?>(nil)
        agent.setResponder { device, _, answer in
            if device == nil { cancelled.withLock { $0 = true } } else { pending.withLock { $0 = answer } }
        }
        try await agent.register()
        let request = Task { try await bus.callAgent(agent, "RequestAuthorization", [Self.device]) }
        try await waitUntil("the request reached the responder") { pending.withLock { $0 != nil } }
        #expect(try await bus.callAgent(agent, "Cancel", []) == [])
        let error = await #expect(throws: DBusError.self) { try await request.value }
        #expect(error?.name == "org.bluez.Error.Canceled")
        #expect(cancelled.withLock { $0 })
        pending.withLock { $0 }?(.accept)  // too late: nothing more happens
    }

    @Test func registersAgainWithANewCapability() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register(requestDefault: true)
        #expect(agent.registeredCapability == "NoInputNoOutput")
        agent.setCapability("KeyboardDisplay")
        try await waitUntil("registered again") { agent.registeredCapability == "KeyboardDisplay" }
        #expect(agent.isDefault)
        try await waitUntil("default again") { bus.manager.calls.count == 5 }
        #expect(
            bus.manager.calls.map(\.member) == [
                "RegisterAgent", "RequestDefaultAgent", "UnregisterAgent", "RegisterAgent", "RequestDefaultAgent",
            ])
        #expect(bus.manager.calls[3].arguments == [.objectPath(agent.path), .string("KeyboardDisplay")])
        agent.setCapability("KeyboardDisplay")  // the same: nothing more
        #expect(bus.manager.calls.count == 5)
    }

    @Test func capabilityChangesApplyInTheOrderTheyWereMade() async throws {
        let bus = try await AgentTestBus()
        let agent = BlueZAgent(connection: bus.app)
        try await agent.register()
        let wanted = ["KeyboardDisplay", "DisplayOnly", "KeyboardOnly", "DisplayYesNo"]
        for _ in 0..<5 {
            for capability in wanted { agent.setCapability(capability) }
        }
        try await waitUntil("the last capability is registered") { agent.registeredCapability == "DisplayYesNo" }
        let registrations = bus.manager.calls.filter { $0.member == "RegisterAgent" }
        #expect(registrations.last?.arguments == [.objectPath(agent.path), .string("DisplayYesNo")])
    }
}
