import BlueZKit
import Foundation
import TestSupport
import Testing

/// The check every end-to-end test passes after it ran: no BlueZKit agent became bluetoothd's
/// default agent unless the test is marked ``Trait/asksForDefaultAgent``, read from bluetoothd's
/// own debug log (`src/agent.c`: "Default agent set to OWNER PATH", "Default agent cleared").
///
/// bluetoothd makes the first agent registered on the machine its default, and any later one
/// the default once those before it leave; the default agent answers every program's pairings.
/// A BlueZKit manager may be it only when its app asked (`requestsDefaultPairingAgent`).
enum DefaultAgentCheck {
    /// The object paths BlueZKit exports its agents at (`/org/bluezkit/agentN`).
    static let ourAgentPrefix = "/org/bluezkit/agent"

    /// The default-agent lines of bluetoothd's log from byte `offset` on, from "Default agent" on.
    static func lines(from offset: UInt64) -> [String] {
        guard let handle = FileHandle(forReadingAtPath: EndToEndScope.bluetoothdLog) else { return [] }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        let log = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        return log.split(separator: "\n").compactMap { line in
            line.range(of: "Default agent ").map { String(line[$0.lowerBound...]) }
        }
    }

    /// Whether `line` makes one of BlueZKit's agents the default.
    static func namesOurAgent(_ line: String) -> Bool {
        line.hasPrefix("Default agent set to ") && line.contains(" \(ourAgentPrefix)")
    }

    /// Records an issue for every BlueZKit agent made the default since `logStart` unless `asked`;
    /// after a test that asked, waits (at most 15 s, scaled) until no BlueZKit agent is the
    /// default any more, so that the next test starts without one. Not when bluetoothd is gone
    /// (`bluetoothdRunning` false): a dead bluetoothd holds no default agent, and logs no
    /// "cleared" line to wait for (a known crash in a test that asked failed here, 2026-12-06).
    static func check(_ test: String, logStart: UInt64, asked: Bool, bluetoothdRunning: Bool = true) async {
        let ours = lines(from: logStart).filter(namesOurAgent)
        if !asked {
            for line in ours {
                Issue.record("\(test) did not ask for the default agent, but bluetoothd says: \(line)")
            }
            return
        }
        guard !ours.isEmpty, bluetoothdRunning else { return }
        let lastLine = { "bluetoothd's last line: \(lines(from: logStart).last ?? "none")" }
        try? await pollUntil(
            "no BlueZKit agent is bluetoothd's default after \(test)", timeout: .seconds(15), diagnostics: lastLine,
            { !(lines(from: logStart).last.map(namesOurAgent) ?? false) })
    }
}

extension DefaultAgentCheck {
    /// Waits until `agent` (a manager's, created with `requestsDefaultPairingAgent`) is registered
    /// and bluetoothd's log since `logStart` names it the default agent, and expects its IO
    /// capability to be `delegate`'s (`NoInputNoOutput` without one): the kernel pairs with the
    /// default agent's capability, so a pairing test must not start before.
    static func waitUntilDefault(
        _ agent: PairingAgent, since logStart: UInt64, delegate: (any PairingAgentDelegate)?
    ) async throws {
        try await waitUntil("our agent is registered", timeout: .seconds(30)) { agent.isRegistered }
        try await pollUntil("bluetoothd names our agent its default", timeout: .seconds(15)) {
            lines(from: logStart).last.map(namesOurAgent) ?? false
        }
        #expect(agent.ioCapability == delegate?.ioCapability ?? .noInputNoOutput)
    }
}

/// Marks an end-to-end test whose managers ask to be bluetoothd's default agent
/// (`requestsDefaultPairingAgent`): ``DefaultAgentCheck`` lets them, and waits until they gave
/// the default back.
struct AsksForDefaultAgent: TestTrait {}

extension Trait where Self == AsksForDefaultAgent {
    /// The test's managers ask to be bluetoothd's default agent (see ``DefaultAgentCheck``).
    static var asksForDefaultAgent: Self { AsksForDefaultAgent() }
}
