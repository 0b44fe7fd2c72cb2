import BlueZKit
import BlueZKitTesting
import Foundation
import Locking

/// The central role's steps: a `CentralManager` and the simulated sensor.
extension InterleavingWorld {
    static let measurementUUID = BluetoothUUID(0x2A37)
    static let locationUUID = BluetoothUUID(0x2A38)
    static let taggedUUID = BluetoothUUID(0x2A39)
    static let commandUUID = BluetoothUUID(0x2A3A)

    /// The current central manager, created (and the sensor found) when there is none; nil when
    /// it does not power on or the sensor cannot be found.
    func ensureCentral() async -> (CentralManager, CentralOrderRecorder, Peripheral)? {
        if let central, let centralRecorder, let sensorPeripheral {
            return (central, centralRecorder, sensorPeripheral)
        }
        if central == nil {
            centralGeneration += 1
            let recorder = CentralOrderRecorder(
                ledger: ledger, generation: centralGeneration, watchedAddress: Self.sensorAddress)
            central = CentralManager(
                delegate: recorder, queue: recorder.queue,
                options: CentralManagerOptions(busAddress: bluez.busAddress))
            centralRecorder = recorder
        }
        guard let central, let centralRecorder,
            await BoundedWait.poll(.seconds(15), { central.state == .poweredOn })
        else { return nil }
        if let sensorIdentifier, let known = central.retrievePeripherals(withIdentifiers: [sensorIdentifier]).first {
            sensorPeripheral = known
        } else if sensor.isInRange {
            // Out of range, a scan finds nothing: the central steps wait until a step brings it back.
            sensorPeripheral = await Self.findSensor(central, sensor)
        }
        guard let sensorPeripheral else { return nil }
        sensorIdentifier = sensorPeripheral.identifier
        sensorPeripheral.delegate = centralRecorder
        return (central, centralRecorder, sensorPeripheral)
    }

    private static func findSensor(_ central: CentralManager, _ sensor: SimulatedPeripheral) async -> Peripheral? {
        let found = PosixMutex<Peripheral?>(nil)
        // The stream exists before the scan starts: the sensor is reported once, as discovery starts.
        let discoveries = central.discoveries()
        let reader = Task { await firstSensor(in: discoveries, into: found) }
        central.scanForPeripherals(withServices: nil)
        _ = await BoundedWait.poll(.seconds(10)) {
            sensor.advertise()
            return found.withLock { $0 } != nil
        }
        reader.cancel()
        central.stopScan()
        return found.withLock { $0 }
    }

    private static func firstSensor(
        in discoveries: AsyncStream<CentralManager.Discovery>, into found: PosixMutex<Peripheral?>
    )
        async
    {
        for await discovery in discoveries {
            let peripheral = discovery.peripheral
            guard peripheral.address == sensorAddress else { continue }
            found.withLock { $0 = peripheral }
            return
        }
    }

    func characteristic(_ uuid: BluetoothUUID) -> Characteristic? { discovered.withLock { $0[uuid] } }

    func performCentral(_ step: InterleavingStep) async {
        if case .releaseCentral = step { return releaseCentral() }
        guard let (central, recorder, peripheral) = await ensureCentral() else { return }
        switch step {
        case .scan:
            central.scanForPeripherals(withServices: nil)
            sensor.advertise()
        case .stopScan:
            central.stopScan()
        case .connect:
            recorder.connectRequested(peripheral)
            central.connect(peripheral)
        case .cancelConnection:
            central.cancelPeripheralConnection(peripheral)
        case .connectAsync(let cancel):
            recorder.connectRequested(peripheral)
            await launch("central.connect(to: sensor), cancel \(cancel)", role: .central, cancel: cancel) {
                try await central.connect(to: peripheral)
                return "connected"
            }
        case .disconnectAsync(let cancel):
            await launch("central.disconnect(from: sensor), cancel \(cancel)", role: .central, cancel: cancel) {
                try await central.disconnect(from: peripheral)
                return "disconnected"
            }
        case .discoverAsync(let cancel):
            let discovered = self.discovered
            await launch("discoverServices + discoverCharacteristics, cancel \(cancel)", role: .central, cancel: cancel)
            {
                let services = try await peripheral.discoverServices(matching: [BluetoothUUID(0x180D)])
                guard let service = services.first(where: { $0.uuid == BluetoothUUID(0x180D) }) else {
                    return "no service"
                }
                let found = try await peripheral.discoverCharacteristics(matching: nil, in: service)
                discovered.withLock { table in
                    for characteristic in found { table[characteristic.uuid] = characteristic }
                }
                return "\(found.count) characteristics"
            }
        case .readAsync(let cancel):
            guard let location = characteristic(Self.locationUUID) else { return }
            await launch("readValue(of: 2A38), cancel \(cancel)", role: .central, cancel: cancel) {
                "\(try await peripheral.readValue(of: location).count) bytes"
            }
        case .writesAsync(let codes):
            guard let tagged = characteristic(Self.taggedUUID) else { return }
            await writeTagged(codes, to: tagged, of: peripheral)
        case .writeWithoutResponse:
            guard let command = characteristic(Self.commandUUID) else { return }
            peripheral.writeValue(Data([0x01]), for: command, type: .withoutResponse)
        case .notificationsStream:
            guard let measurement = characteristic(Self.measurementUUID) else { return }
            let values = peripheral.notifications(of: measurement)
            let id = consume("notifications(of: 2A37)", role: .central) {
                do { for try await _ in values {} } catch {}
            }
            notificationStreams.append(id)
            await BoundedWait.pace(.milliseconds(50))
        case .endNotificationsStream:
            guard !notificationStreams.isEmpty else { return }
            streams[notificationStreams.removeFirst()]?.cancel()
            await BoundedWait.pace(.milliseconds(20))
        case .discoveriesStream:
            let discoveries = central.discoveries()
            consume("central.discoveries()", role: .central) { for await _ in discoveries {} }
        default:
            break
        }
    }

    /// Writes with response, all at once, each tagged with a number and the ATT code the sensor
    /// is to answer it with: a caller that gets another write's result shows it.
    private func writeTagged(_ codes: [UInt8], to tagged: Characteristic, of peripheral: Peripheral) async {
        let answers = sensorAnswers
        let ledger = self.ledger
        for code in codes {
            nextTag &+= 1
            let tag = nextTag
            let value = Data([UInt8(tag >> 8), UInt8(tag & 0xFF), code])
            let what = "writeValue(tag \(tag)) to 2A39, which the sensor answers \(code == 0 ? "ok" : "ATT \(code)")"
            await launch(what, role: .central, cancel: .never, pace: .zero) {
                do {
                    try await peripheral.writeValue(value, to: tagged)
                } catch let error as ATTError {
                    let answered = answers.withLock { $0[tag] }
                    // Answered otherwise by the sensor, or an application error it never gave.
                    if let answered, answered != error.code.byte {
                        ledger.violate(
                            .ownResult, "\(what): threw ATT \(error.code.byte), the sensor answered \(answered)")
                    } else if answered == nil, error.code.byte >= 0x80 {
                        ledger.violate(
                            .ownResult, "\(what): threw ATT \(error.code.byte) for a write the sensor never saw")
                    }
                    throw error
                }
                let answered = answers.withLock { $0[tag] }
                if answered != 0 {
                    let sensorSaid = answered.map { "ATT \($0)" } ?? "nothing (it never saw it)"
                    ledger.violate(.ownResult, "\(what): returned success, the sensor answered \(sensorSaid)")
                }
                return "ok"
            }
        }
        await BoundedWait.pace(.milliseconds(150))
    }

    private func releaseCentral() {
        guard let central else { return }
        releasedCentrals.append((centralGeneration, Weak(central)))
        self.central = nil
        centralRecorder = nil
        sensorPeripheral = nil
        discovered.withLock { $0.removeAll() }
        notificationStreams.removeAll()
    }
}
