import BlueZKit
import Dispatch
import Foundation
import HeartRateProfile

/// The central side: finds a heart-rate sensor, connects, reads where it is worn, subscribes
/// to its measurements and prints them; when the link drops it asks to connect again and
/// waits, without a timeout (the seeds' door-lock pattern).
///
/// Everything runs on `queue` (delegate calls of the manager and the peripheral), so the
/// mutable state needs no lock — the invariant behind `@unchecked Sendable`.
final class HeartRateMonitor: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    struct Configuration {
        var adapter: String?
        var name: String?
        var identifier: UUID?
        var restoreIdentifier: String?
        /// Exit (status 0) after this many measurements.
        var count: Int?
        /// Receive the measurements through `AcquireNotify`'s socket (`usesNotifySockets`).
        var usesNotifySockets = false
    }

    let queue = DispatchQueue(label: "heart-rate-central")
    private let configuration: Configuration
    private let output: EventOutput
    private var manager: CentralManager!
    /// The sensor we use; kept strongly, as Core Bluetooth requires.
    private var sensor: Peripheral?
    private var readings = 0
    /// `--count` readings were printed: the program is on its way out.
    private var finished = false
    /// The sensor's services changed since the Heart Rate service was last found.
    private var servicesChanged = false

    init(configuration: Configuration, output: EventOutput) {
        self.configuration = configuration
        self.output = output
    }

    func start() {
        queue.async {
            self.manager = CentralManager(
                delegate: self, queue: self.queue,
                options: CentralManagerOptions(
                    restoreIdentifier: self.configuration.restoreIdentifier, adapter: self.configuration.adapter,
                    usesNotifySockets: self.configuration.usesNotifySockets))
        }
    }

    /// Unsubscribes and disconnects; `done` runs on `queue`.
    func stop(_ done: @escaping @Sendable () -> Void) {
        queue.async {
            if let sensor = self.sensor { self.manager.cancelPeripheralConnection(sensor) }
            self.queue.asyncAfter(deadline: .now() + .milliseconds(300), execute: done)
        }
    }

    // MARK: CentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CentralManager) {
        output.emit("state", ["state": "\(central.state)"], human: "Bluetooth is \(central.state)")
        guard central.state == .poweredOn else { return }
        if let sensor {
            // A sensor we already had (restored, or connected before a power cycle). A restored
            // link that bluetoothd kept is connected already: carry on with what was discovered.
            // Otherwise connect again; the request waits for it as long as it takes.
            if sensor.state == .connected { continueSetUp(sensor) } else { central.connect(sensor) }
            return
        }
        if let identifier = configuration.identifier,
            let known = central.retrievePeripherals(withIdentifiers: [identifier]).first
        {
            return use(known)
        }
        central.scanForPeripherals(withServices: [HeartRateProfile.service], options: nil)
        output.emit("scanning", [:], human: "Scanning for heart-rate sensors…")
    }

    func centralManager(_ central: CentralManager, willRestoreState dict: [String: Any]) {
        let peripherals = dict[CBCentralManagerRestoredStatePeripheralsKey] as? [Peripheral] ?? []
        output.emit(
            "restored", ["peripherals": peripherals.map(\.identifier.uuidString)],
            human: "Restored \(peripherals.count) peripheral\(peripherals.count == 1 ? "" : "s")")
        guard let restored = peripherals.first else { return }
        // No new scan: the sensor, its services and its subscription come back with it;
        // didUpdateState carries on from there.
        sensor = restored
        restored.delegate = self
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        let name = advertisementData.localName ?? peripheral.name
        if let wanted = configuration.name, wanted != name { return }
        if let wanted = configuration.identifier, wanted != peripheral.identifier { return }
        output.emit(
            "discovered", ["id": peripheral.identifier.uuidString, "name": name ?? "", "rssi": RSSI],
            human:
                "Found \(name ?? "an unnamed sensor") (\(peripheral.identifier.uuidString)), \(Self.describe(rssi: RSSI))"
        )
        central.stopScan()
        use(peripheral)
    }

    /// Core Bluetooth's 127 means the controller reported no RSSI (btvirt's virtual controllers
    /// never do): said so, rather than printed as 127 dBm.
    static func describe(rssi: Int) -> String {
        rssi == 127 ? "RSSI unavailable" : "RSSI \(rssi) dBm"
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        output.emit("connected", ["id": peripheral.identifier.uuidString], human: "Connected")
        continueSetUp(peripheral)
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        output.error("cannot connect: \(error.map { "\($0)" } ?? "unknown error")")
        exit(1)
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        output.emit(
            "disconnected", ["id": peripheral.identifier.uuidString, "error": error.map { "\($0)" } ?? NSNull()],
            human: "Disconnected\(error.map { ": \($0)" } ?? ""); waiting for the sensor to come back")
        // The door-lock pattern: ask again at once; the request never times out. Not when the
        // link ended because `--count` readings were printed and `stop` cancelled it.
        guard !finished else { return }
        central.connect(peripheral)
    }

    // MARK: PeripheralDelegate

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        if let error { return output.error("service discovery failed: \(error)") }
        guard let service = peripheral.services?.first(where: { $0.uuid == HeartRateProfile.service }) else {
            // Gone with a change of the sensor's services (its app restarting, say): the next
            // change brings it back, and didModifyServices looks again.
            if servicesChanged { return }
            return output.error("the sensor has no Heart Rate service")
        }
        servicesChanged = false
        peripheral.discoverCharacteristics(
            [HeartRateProfile.measurement, HeartRateProfile.bodySensorLocation, HeartRateProfile.controlPoint],
            for: service)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        if let error { return output.error("characteristic discovery failed: \(error)") }
        subscribe(peripheral, service)
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if let error { return output.error("reading \(characteristic.uuid) failed: \(error)") }
        guard let value = characteristic.value else { return }
        switch characteristic.uuid {
        case HeartRateProfile.bodySensorLocation:
            let location = value.first ?? 0
            output.emit(
                "sensorLocation", ["value": Int(location)],
                human: "Sensor worn on the \(HeartRateProfile.bodySensorLocationName(location))")
        case HeartRateProfile.measurement:
            guard !finished else { return }
            do throws(HeartRateProfileError) {
                output.emit(heartRate: try HeartRateMeasurement(decoding: value))
                readings += 1
                if let count = configuration.count, readings >= count {
                    finished = true
                    stop { exit(0) }
                }
            } catch {
                output.error("unreadable measurement: \(error)")
            }
        default: break
        }
    }

    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
        let present = peripheral.services?.contains { $0.uuid == HeartRateProfile.service } == true
        output.emit(
            "servicesChanged", ["invalidated": invalidatedServices.map { "\($0.uuid)" }],
            human: "The sensor's services changed (\(invalidatedServices.count) invalidated)")
        // The Heart Rate service went (invalidated services leave `services`, its subscription
        // with it) or may have come back: look for it again; didDiscoverServices carries on as
        // after a connect.
        guard !present else { return }
        servicesChanged = true
        peripheral.discoverServices([HeartRateProfile.service])
    }

    /// bluetoothd read the sensor's Battery Level by itself (Linux: `Battery1`), or was notified
    /// of a new one.
    func peripheral(_ peripheral: Peripheral, didUpdateBatteryLevel level: Int?) {
        guard let level else { return }
        output.emit("battery", ["level": level], human: "Sensor battery \(level) %")
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error { output.error("subscribing to \(characteristic.uuid) failed: \(error)") }
    }

    // MARK: Steps

    private func use(_ peripheral: Peripheral) {
        sensor = peripheral
        peripheral.delegate = self
        manager.connect(peripheral)
    }

    /// Discovers what is missing, subscribes, reads the location: after a connect, or with a
    /// restored peripheral that already carries its services and notify state.
    private func continueSetUp(_ peripheral: Peripheral) {
        guard let service = peripheral.services?.first(where: { $0.uuid == HeartRateProfile.service }) else {
            return peripheral.discoverServices([HeartRateProfile.service])
        }
        guard service.characteristics != nil else {
            return peripheral.discoverCharacteristics(
                [HeartRateProfile.measurement, HeartRateProfile.bodySensorLocation, HeartRateProfile.controlPoint],
                for: service)
        }
        subscribe(peripheral, service)
    }

    /// Subscribes to the measurement, then reads the location: ATT answers one request at a
    /// time, so the subscription first lets the first reading come one round trip sooner.
    private func subscribe(_ peripheral: Peripheral, _ service: Service) {
        let characteristics = service.characteristics ?? []
        guard let measurement = characteristics.first(where: { $0.uuid == HeartRateProfile.measurement }) else {
            return output.error("the sensor has no Heart Rate Measurement characteristic")
        }
        if !measurement.isNotifying { peripheral.setNotifyValue(true, for: measurement) }
        if let location = characteristics.first(where: { $0.uuid == HeartRateProfile.bodySensorLocation }) {
            peripheral.readValue(for: location)
        }
    }
}
