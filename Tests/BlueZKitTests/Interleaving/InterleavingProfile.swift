import TestSupport

/// Which areas a run leans on: the weights of the step kinds. Every profile can draw every step
/// kind of its role; a profile only makes the steps of its area more likely, and opens with a
/// fixed prologue that brings the area's objects to life (a connected, discovered sensor; a
/// published service with subscribed centrals).
enum InterleavingProfile: String, CaseIterable, Sendable, CustomStringConvertible {
    case mixed, cancellation, advertising, notifySockets, release, writes

    var description: String { rawValue }

    typealias Draw = (inout SplitMix64) -> InterleavingStep

    /// The steps `seed` gives under this profile: the prologue, then 10 to 29 drawn steps.
    func steps(seed: UInt64) -> [InterleavingStep] {
        var random = SplitMix64(seed: seed)
        let table = weights
        let count = 10 + random.below(20)
        var steps = prologue
        for _ in 0..<count {
            let draw: Draw = random.weighted(table)
            steps.append(draw(&random))
        }
        return steps
    }

    var prologue: [InterleavingStep] {
        switch self {
        case .mixed, .cancellation, .release, .writes:
            [.connectAsync(.never), .settle, .discoverAsync(.never), .settle]
        case .advertising: [.addService, .settle]
        case .notifySockets: [.addService, .settle, .centralSubscribes(0), .centralSubscribes(1)]
        }
    }

    private static func cancel(_ random: inout SplitMix64) -> InterleavingStep.Cancel {
        switch random.below(3) {
        case 0: .never
        case 1: .before
        default: .after(milliseconds: random.below(40))
        }
    }

    private static func method(_ random: inout SplitMix64, _ methods: [InterleavingStep.Method])
        -> InterleavingStep.Method
    {
        methods[random.below(methods.count)]
    }

    private static let centralMethods: [InterleavingStep.Method] = [
        .connect, .readValue, .writeValue, .startNotify, .getProperty,
    ]
    private static let peripheralMethods: [InterleavingStep.Method] = [.registerAdvertisement, .registerApplication]

    private var central: [(Draw, Int)] {
        [
            ({ _ in .scan }, 2), ({ _ in .stopScan }, 2), ({ _ in .connect }, 2), ({ _ in .cancelConnection }, 2),
            ({ .connectAsync(Self.cancel(&$0)) }, self == .cancellation ? 12 : 3),
            ({ .disconnectAsync(Self.cancel(&$0)) }, 2),
            ({ .discoverAsync(Self.cancel(&$0)) }, self == .cancellation ? 6 : 3),
            ({ .readAsync(Self.cancel(&$0)) }, self == .cancellation || self == .release ? 8 : 3),
            (
                { random in .writesAsync((0..<(1 + random.below(4))).map { _ in Self.writeCode(&random) }) },
                self == .writes ? 16 : 3
            ),
            ({ _ in .writeWithoutResponse }, 2),
            ({ _ in .notificationsStream }, self == .release ? 8 : 3), ({ _ in .endNotificationsStream }, 2),
            ({ _ in .discoveriesStream }, self == .release ? 6 : 2), ({ _ in .sensorNotifies }, 3),
            ({ _ in .releaseCentral }, self == .release ? 6 : 1),
            ({ .sensorInRange($0.chance(40)) }, self == .cancellation ? 8 : 2), ({ _ in .sensorDropsLink }, 2),
            (
                { .delayNext(Self.method(&$0, Self.centralMethods), milliseconds: 50 + $0.below(250)) },
                self == .writes ? 6 : 3
            ),
            ({ .failNext(Self.method(&$0, Self.centralMethods)) }, 2),
            ({ .holdNext(Self.method(&$0, Self.centralMethods)) }, self == .cancellation || self == .release ? 6 : 2),
        ]
    }

    private var peripheral: [(Draw, Int)] {
        [
            ({ _ in .addService }, 3), ({ _ in .removeService }, 2),
            ({ _ in .startAdvertising }, self == .advertising ? 10 : 3),
            ({ _ in .stopAdvertising }, self == .advertising ? 10 : 3),
            ({ .updateValue(count: 1 + $0.below(self == .notifySockets ? 400 : 8)) }, self == .notifySockets ? 12 : 3),
            ({ _ in .requestsStream }, self == .release ? 6 : 2),
            ({ .centralSubscribes($0.below(2)) }, self == .notifySockets ? 6 : 2),
            ({ .centralUnsubscribes($0.below(2)) }, 2),
            ({ .centralDisconnects($0.below(2)) }, self == .notifySockets ? 6 : 2),
            ({ .centralReconnects($0.below(2)) }, self == .notifySockets ? 6 : 2),
            ({ .centralWrites($0.below(2)) }, 2),
            ({ _ in .releasePeripheralManager }, self == .release ? 4 : 1),
            (
                { .delayNext(Self.method(&$0, Self.peripheralMethods), milliseconds: 50 + $0.below(250)) },
                self == .advertising ? 8 : 2
            ),
            ({ .failNext(Self.method(&$0, Self.peripheralMethods)) }, 1),
            ({ .stallCentral($0.below(2)) }, self == .notifySockets ? 6 : 1),
            ({ .resumeCentral($0.below(2)) }, self == .notifySockets ? 3 : 1),
        ]
    }

    private var shared: [(Draw, Int)] {
        [
            ({ _ in .restartBluetoothd }, 1), ({ _ in .powerCycle }, 1),
            ({ .pause(milliseconds: 10 + $0.below(200)) }, 4),
        ]
    }

    private var weights: [(Draw, Int)] {
        switch self {
        case .mixed, .release: central + peripheral + shared
        case .cancellation, .writes: central + shared
        case .advertising, .notifySockets: peripheral + shared
        }
    }

    /// The ATT code the sensor answers a tagged write with: mostly accepted, else Unlikely Error
    /// (0x0E) or an application error.
    private static func writeCode(_ random: inout SplitMix64) -> UInt8 {
        switch random.below(4) {
        case 0: 0x0E
        case 1: 0x80 + UInt8(random.below(16))
        default: 0
        }
    }
}
