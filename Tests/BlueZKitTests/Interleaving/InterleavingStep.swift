/// One step of an interleaving run: a public API call of the central or peripheral role, or a
/// fault the simulated bluetoothd shows. Its parameters are all drawn from the seed, so a list of
/// steps is a replay; ``description`` is how a failure prints it.
enum InterleavingStep: Hashable, Sendable, CustomStringConvertible {
    /// When an async call's task is cancelled.
    enum Cancel: Hashable, Sendable, CustomStringConvertible {
        /// Never (until the run ends).
        case never
        /// The task is cancelled before the call starts.
        case before
        /// The task is cancelled this many milliseconds after the call started.
        case after(milliseconds: Int)

        var description: String {
            switch self {
            case .never: "never"
            case .before: "before"
            case .after(let milliseconds): "after \(milliseconds) ms"
            }
        }
    }

    /// A method of bluetoothd a fault is injected into.
    enum Method: String, Hashable, Sendable, CaseIterable {
        case connect, readValue, writeValue, startNotify, getProperty
        case registerAdvertisement, registerApplication
    }

    // The central role (a CentralManager and the simulated sensor it talks to).
    case scan
    case stopScan
    case connect
    case cancelConnection
    case connectAsync(Cancel)
    case disconnectAsync(Cancel)
    case discoverAsync(Cancel)
    case readAsync(Cancel)
    /// Writes with response, all at once, each to be answered with its ATT code (0: accepted).
    case writesAsync([UInt8])
    case writeWithoutResponse
    case notificationsStream
    case endNotificationsStream
    case discoveriesStream
    case sensorNotifies
    case releaseCentral

    // The peripheral role (a PeripheralManager and simulated centrals that use it).
    case addService
    case removeService
    case startAdvertising
    case stopAdvertising
    case updateValue(count: Int)
    case requestsStream
    case centralSubscribes(Int)
    case centralUnsubscribes(Int)
    case centralDisconnects(Int)
    case centralReconnects(Int)
    case centralWrites(Int)
    case releasePeripheralManager

    // Faults.
    case sensorInRange(Bool)
    case sensorDropsLink
    case restartBluetoothd
    case powerCycle
    case delayNext(Method, milliseconds: Int)
    case failNext(Method)
    case holdNext(Method)
    /// A central's notify sockets fill up: bluetoothd stops reading them (``SimulatedCentral``'s stall).
    case stallCentral(Int)
    case resumeCentral(Int)
    /// Lets what is under way go on for a while (bounded).
    case pause(milliseconds: Int)
    /// Waits until every call started so far ended (at most 10 s, scaled): what the next steps
    /// build on is done, however loaded the machine is.
    case settle

    var description: String {
        switch self {
        case .scan: "central.scanForPeripherals"
        case .stopScan: "central.stopScan"
        case .connect: "central.connect(sensor)"
        case .cancelConnection: "central.cancelPeripheralConnection(sensor)"
        case .connectAsync(let cancel): "await central.connect(to: sensor), cancel \(cancel)"
        case .disconnectAsync(let cancel): "await central.disconnect(from: sensor), cancel \(cancel)"
        case .discoverAsync(let cancel): "await sensor.discoverServices + discoverCharacteristics, cancel \(cancel)"
        case .readAsync(let cancel): "await sensor.readValue(of: 2A38), cancel \(cancel)"
        case .writesAsync(let codes):
            "await sensor.writeValue(tagged) x\(codes.count), answered \(codes.map { $0 == 0 ? "ok" : "ATT \($0)" })"
        case .writeWithoutResponse: "sensor.writeValue(.withoutResponse)"
        case .notificationsStream: "for await sensor.notifications(of: 2A37)"
        case .endNotificationsStream: "cancel the oldest notifications stream"
        case .discoveriesStream: "for await central.discoveries()"
        case .sensorNotifies: "simulated sensor notifies 2A37"
        case .releaseCentral: "release the CentralManager"
        case .addService: "peripheralManager.add(service)"
        case .removeService: "peripheralManager.remove(service)"
        case .startAdvertising: "try await peripheralManager.startAdvertising(with:) (not awaited)"
        case .stopAdvertising: "peripheralManager.stopAdvertising()"
        case .updateValue(let count): "peripheralManager.updateValue x\(count)"
        case .requestsStream: "for await peripheralManager.requests() (answers each)"
        case .centralSubscribes(let index): "simulated central \(index) subscribes"
        case .centralUnsubscribes(let index): "simulated central \(index) unsubscribes"
        case .centralDisconnects(let index): "simulated central \(index) drops its link"
        case .centralReconnects(let index): "simulated central \(index) connects again"
        case .centralWrites(let index): "simulated central \(index) writes a request"
        case .releasePeripheralManager: "release the PeripheralManager"
        case .sensorInRange(let inRange): "sensor.setInRange(\(inRange))"
        case .sensorDropsLink: "sensor.dropConnection()"
        case .restartBluetoothd: "bluez.restart()"
        case .powerCycle: "adapter power off, then on"
        case .delayNext(let method, let milliseconds): "fault: next \(method) replies \(milliseconds) ms late"
        case .failNext(let method): "fault: next \(method) fails"
        case .holdNext(let method): "fault: next \(method) never replies"
        case .stallCentral(let index): "fault: simulated central \(index)'s notify sockets fill up (stall)"
        case .resumeCentral(let index): "simulated central \(index)'s notify sockets drain again"
        case .pause(let milliseconds): "let things run \(milliseconds) ms"
        case .settle: "wait until the calls started so far ended"
        }
    }
}
