import BlueZKit
import BlueZKitTesting
import Foundation
import Locking

/// What an interleaving run acts on: a simulated bluetoothd 5.82 with a sensor in range (for the
/// central role) and two simulated centrals (for the peripheral role), the managers under test
/// (created when a step needs one, released by a step), and the model of what the app asked for.
///
/// Used from the run's one task; the tasks it starts share only `Sendable` things (the ledger,
/// the managers, boxes behind locks).
final class InterleavingWorld {
    final class Weak {
        weak var object: AnyObject?
        init(_ object: AnyObject) { self.object = object }
    }

    /// What the run knows of a simulated central.
    struct CentralModel {
        var connected = true
        var subscribed = false
        var stalled = false
    }

    static let sensorAddress = "C0:FF:EE:00:00:01"
    static let serviceUUID = "0000abcd-0000-1000-8000-00805f9b34fb"

    let bluez: SimulatedBlueZ
    let ledger = CallLedger()
    let sensor: SimulatedPeripheral
    let measurement: SimulatedCharacteristic
    /// The ATT code the sensor answered each tagged write with, by tag.
    let sensorAnswers: PosixMutex<[UInt16: UInt8]>
    var nextTag: UInt16 = 0

    var central: CentralManager?
    var centralRecorder: CentralOrderRecorder?
    var centralGeneration = 0
    var sensorPeripheral: Peripheral?
    var sensorIdentifier: UUID?
    /// The sensor's characteristics the last discovery found, by UUID.
    let discovered = PosixMutex<[BluetoothUUID: Characteristic]>([:])
    var releasedCentrals: [(generation: Int, manager: Weak)] = []

    var peripheralManager: PeripheralManager?
    var peripheralRecorder: PeripheralManagerRecorder?
    var peripheralGeneration = 0
    var service: MutableService?
    var notifyCharacteristic: MutableCharacteristic?
    /// The app's last call: `add` (true) or `remove` (false) of ``service``.
    var serviceWanted = false
    /// The app's last call: `startAdvertising` (true), `stopAdvertising` (false), or none.
    var advertisingWanted: Bool?
    /// Owners of registrations made before the current peripheral manager (not its own).
    var foreignOwners: Set<String> = []
    var releasedPeripheralManagers: [(generation: Int, manager: Weak)] = []

    var centrals: [SimulatedCentral] = []
    var centralModels: [CentralModel] = []
    var centralDrains: [Task<Void, Never>] = []

    /// Async calls in flight, by ledger number.
    var calls: [Int: Task<Void, Never>] = [:]
    /// Stream consumers, by ledger number; `notificationStreams` in the order they started.
    var streams: [Int: Task<Void, Never>] = [:]
    var notificationStreams: [Int] = []

    private init(
        bluez: SimulatedBlueZ, sensor: SimulatedPeripheral, measurement: SimulatedCharacteristic,
        answers: PosixMutex<[UInt16: UInt8]>
    ) {
        self.bluez = bluez
        self.sensor = sensor
        self.measurement = measurement
        self.sensorAnswers = answers
    }

    /// Starts the simulator and puts the sensor in range.
    static func make() async throws -> InterleavingWorld {
        let bluez = try await SimulatedBlueZ.start(options: .init(version: .bluez5_82))
        let answers = PosixMutex<[UInt16: UInt8]>([:])
        let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
        let tagged = SimulatedCharacteristic(
            uuid: "2A39", flags: ["write"],
            onWrite: { request throws(SimulatedATTError) in
                // [tag high, tag low, code]: answer with the code the run chose for this tag.
                guard request.value.count == 3 else { return }
                let tag = UInt16(request.value[0]) << 8 | UInt16(request.value[1])
                let code = request.value[2]
                answers.withLock { $0[tag] = code }
                if code != 0 { throw SimulatedATTError(code: code) }
            })
        let sensor = SimulatedPeripheral(
            address: sensorAddress, name: "HRM", serviceUUIDs: ["180D"],
            services: [
                SimulatedService(
                    uuid: "180D",
                    characteristics: [
                        measurement, SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [0x02]), tagged,
                        SimulatedCharacteristic(uuid: "2A3A", flags: ["write-without-response"]),
                    ])
            ])
        try bluez.addPeripheral(sensor)
        return InterleavingWorld(bluez: bluez, sensor: sensor, measurement: measurement, answers: answers)
    }

    /// Ends every task, releases the managers (waiting a little for them to go, so that they
    /// close their bus connections themselves), and stops the simulator.
    func tearDown() async {
        for task in calls.values { task.cancel() }
        for task in streams.values { task.cancel() }
        for task in centralDrains { task.cancel() }
        let managers = [central.map { Weak($0) }, peripheralManager.map { Weak($0) }].compactMap { $0 }
        central = nil
        peripheralManager = nil
        sensorPeripheral = nil
        discovered.withLock { $0.removeAll() }
        _ = await BoundedWait.poll(.seconds(1)) { managers.allSatisfy { $0.object == nil } }
        bluez.stop()
    }

    /// Runs one step: starts what it asks for and lets it run for a short pace.
    func perform(_ step: InterleavingStep) async {
        switch step {
        case .scan, .stopScan, .connect, .cancelConnection, .connectAsync, .disconnectAsync, .discoverAsync,
            .readAsync, .writesAsync, .writeWithoutResponse, .notificationsStream, .endNotificationsStream,
            .discoveriesStream, .releaseCentral:
            await performCentral(step)
        case .addService, .removeService, .startAdvertising, .stopAdvertising, .updateValue, .requestsStream,
            .centralSubscribes, .centralUnsubscribes, .centralDisconnects, .centralReconnects, .centralWrites,
            .releasePeripheralManager:
            await performPeripheral(step)
        case .sensorNotifies, .sensorInRange, .sensorDropsLink, .restartBluetoothd, .powerCycle, .delayNext,
            .failNext, .holdNext, .stallCentral, .resumeCentral, .pause, .settle:
            await performFault(step)
        }
    }

    // MARK: Tasks

    /// Starts an async call in a task cancelled as `cancel` says, and paces the run.
    ///
    /// The task starts at once (`Task.immediate`), so the call is made at its step: everything up
    /// to its first suspension (for `addService`, handing the service to the manager) happens
    /// before the next step. A task merely enqueued could start after later steps when the
    /// executor is busy (under ThreadSanitizer with the whole tier running), and the library then
    /// saw, say, a `remove(_:)` before the `add` the run's model had taken as the earlier call.
    func launch(
        _ what: String, role: CallLedger.Role, cancel: InterleavingStep.Cancel, pace: Duration = .milliseconds(100),
        _ body: @escaping @Sendable () async throws -> String
    ) async {
        let generation = role == .central ? centralGeneration : peripheralGeneration
        let id = ledger.begin(what, role: role, generation: generation)
        let ledger = self.ledger
        let task = Task.immediate {
            if cancel == .before {
                withUnsafeCurrentTask { $0?.cancel() }
                ledger.cancelled(id)
            }
            do {
                ledger.ended(id, "returned \(try await body())")
            } catch {
                ledger.ended(id, "threw \(error)")
            }
        }
        calls[id] = task
        if case .after(let milliseconds) = cancel {
            await BoundedWait.pace(.milliseconds(milliseconds)) { ledger.hasEnded(id) }
            task.cancel()
            ledger.cancelled(id)
        }
        await BoundedWait.pace(pace) { ledger.hasEnded(id) }
    }

    /// Starts consuming a stream until it finishes.
    @discardableResult
    func consume(_ what: String, role: CallLedger.Role, _ body: @escaping @Sendable () async -> Void) -> Int {
        let generation = role == .central ? centralGeneration : peripheralGeneration
        let id = ledger.begin(what, role: role, generation: generation, isStream: true)
        let ledger = self.ledger
        streams[id] = Task {
            await body()
            ledger.ended(id, "finished")
        }
        return id
    }

    /// Runs `body` (a simulated device's action, not the API under test) for at most 1 s.
    func bounded(_ body: @escaping @Sendable () async -> Void) async {
        let done = PosixMutex(false)
        let task = Task.immediate {
            await body()
            done.withLock { $0 = true }
        }
        if !(await BoundedWait.poll(.seconds(1)) { done.withLock { $0 } }) { task.cancel() }
    }
}
