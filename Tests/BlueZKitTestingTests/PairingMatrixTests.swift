import Testing

@testable import BlueZKitTesting

/// The simulated kernel's LE Secure Connections association models (Core Specification Vol 3
/// Part H, table 2.8): our agent's registered capability against the peripheral's.
@Suite(.timeLimit(.minutes(5))) struct PairingMatrixTests {
    typealias Capability = SimulatedPeripheral.IOCapability

    /// Rows: our agent's capability; columns: the peripheral's, in `Capability.allCases` order
    /// (DisplayOnly, DisplayYesNo, KeyboardOnly, NoInputNoOutput, KeyboardDisplay).
    /// J just works, N numeric comparison, E we enter the passkey, D we display it.
    static let table: [Capability: String] = [
        .displayOnly: "JJDJD",
        .displayYesNo: "JNDJN",
        .keyboardOnly: "EEEJE",
        .noInputNoOutput: "JJJJJ",
        .keyboardDisplay: "ENDJN",
    ]

    static func letter(_ method: SimulatorCore.PairingMethod) -> Character {
        switch method {
        case .justWorks: "J"
        case .numericComparison: "N"
        case .enterPasskey: "E"
        case .displayPasskey: "D"
        }
    }

    @Test(arguments: Capability.allCases) func followsTheMatrix(_ ours: Capability) {
        let row = String(
            Capability.allCases.map { Self.letter(SimulatorCore.pairingMethod(agent: ours.rawValue, peripheral: $0)) })
        #expect(row == Self.table[ours], "\(ours)")
    }

    @Test func anEmptyCapabilityIsKeyboardDisplayAsInBluetoothd() {
        for peripheral in Capability.allCases {
            #expect(
                SimulatorCore.pairingMethod(agent: "", peripheral: peripheral)
                    == SimulatorCore.pairingMethod(agent: "KeyboardDisplay", peripheral: peripheral))
        }
    }

    @Test func aPeripheralWithoutCapabilityIsJustWorksByDefault() {
        let peripheral = SimulatedPeripheral(address: "C0:FF:EE:00:00:01")
        #expect(peripheral.ioCapability == .noInputNoOutput)
        #expect(peripheral.passkey == 123_456)
        #expect(SimulatedPeripheral(address: "C0:FF:EE:00:00:02", passkey: 1_654_321).passkey == 654_321)
    }
}
