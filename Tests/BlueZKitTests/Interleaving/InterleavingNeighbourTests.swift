import Testing

/// The invariants that catch issue 36's bugs can hold: each bug's minimal replay, changed so
/// that the bug's window is not there (the cancellation after the call started, the registration
/// answered before the stop, the stalled central resumed instead of dropped, nothing left open at
/// release, writes whose results need no extra round trip), breaks nothing on today's code.
@Suite(.timeLimit(.minutes(1))) struct InterleavingNeighbourTests {
    struct Replay: Sendable, CustomTestStringConvertible {
        let name: String
        let steps: [InterleavingStep]
        var testDescription: String { name }
    }

    static let replays: [Replay] = [
        Replay(
            name: "bug 1: connect(to:) cancelled once started",
            steps: [.disconnectAsync(.never), .sensorInRange(false), .connectAsync(.after(milliseconds: 20))]),
        Replay(
            name: "bug 1: a held read cancelled once started",
            steps: [
                .connectAsync(.never), .settle, .discoverAsync(.never), .holdNext(.readValue),
                .readAsync(.after(milliseconds: 20)),
            ]),
        Replay(
            name: "bug 2: stop after the registration",
            steps: [.addService, .startAdvertising, .settle, .stopAdvertising]),
        Replay(
            name: "bug 2: a late registration, stopped after it",
            steps: [
                .delayNext(.registerAdvertisement, milliseconds: 150), .startAdvertising, .settle, .stopAdvertising,
            ]),
        Replay(
            name: "bug 3: the full central resumes",
            steps: [
                .addService, .centralSubscribes(0), .centralSubscribes(1), .stallCentral(0), .updateValue(count: 400),
                .resumeCentral(0),
            ]),
        Replay(
            name: "bug 3: a central with room drops its link",
            steps: [
                .addService, .centralSubscribes(0), .centralSubscribes(1), .centralDisconnects(0),
                .updateValue(count: 10),
            ]),
        Replay(
            name: "bug 4: release with nothing open",
            steps: [
                .connectAsync(.never), .settle, .discoverAsync(.never), .settle, .releaseCentral,
                .releasePeripheralManager,
            ]),
        Replay(name: "bug 4: streams of a manager kept", steps: [.discoveriesStream, .requestsStream]),
        Replay(
            name: "bug 5: one write answered 0x0E",
            steps: [.connectAsync(.never), .settle, .discoverAsync(.never), .settle, .writesAsync([0x0E])]),
        Replay(
            name: "bug 5: writes answered at once",
            steps: [.connectAsync(.never), .settle, .discoverAsync(.never), .settle, .writesAsync([0x80, 0, 0x81, 0])]),
    ]

    @Test(arguments: replays) func holds(_ replay: Replay) async throws {
        let outcome = try await InterleavingRunner.run(replay.steps)
        #expect(outcome == nil, "\(outcome.map { "\($0.violation)" } ?? "")")
    }
}
