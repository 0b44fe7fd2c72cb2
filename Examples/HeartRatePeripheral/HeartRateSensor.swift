import BlueZKit
import Dispatch
import Foundation
import HeartRateProfile

/// A heart-rate sensor as a BLE peripheral: the Heart Rate, Device Information and Battery
/// services, advertised by name and 0x180D, sending a plausible heart rate to its subscribers.
///
/// Everything runs on `queue`: the manager calls the delegate there and the measurement
/// metronome ticks there, so the mutable state below needs no lock (the invariant behind
/// `@unchecked Sendable`). The measurements are paced by a ``Metronome`` (a thread sleeping to
/// an absolute schedule) rather than a `DispatchSourceTimer`: one thread wake-up per value sent
/// instead of two.
final class HeartRateSensor: PeripheralManagerDelegate, @unchecked Sendable {
    struct Configuration {
        var adapter: String?
        var name = "BlueZKit HRM"
        var interval: Duration = .seconds(1)
        var restoreIdentifier: String?
    }

    let queue = DispatchQueue(label: "heart-rate-peripheral")
    private let configuration: Configuration
    private let output: EventOutput
    private var manager: PeripheralManager!
    private var metronome: Metronome?

    // Replaced by the restored objects when the manager restores its state.
    private var measurement = MutableCharacteristic(
        type: HeartRateProfile.measurement, properties: [.notify], value: nil, permissions: [])
    private var controlPoint = MutableCharacteristic(
        type: HeartRateProfile.controlPoint, properties: [.write], value: nil, permissions: [.writeable])
    private var batteryLevel = MutableCharacteristic(
        type: HeartRateProfile.batteryLevel, properties: [.read, .notify], value: nil, permissions: [.readable])
    private var services: [MutableService] = []
    private var servicesAdded = 0
    private var published = false

    private var heartRate = HeartRateModel()
    /// A measurement `updateValue` refused; sent when the manager is ready again.
    private var pending: Data?
    private var battery: UInt8 = 100

    init(configuration: Configuration, output: EventOutput) {
        self.configuration = configuration
        self.output = output
        services = makeServices()
    }

    /// Creates the manager; everything else follows from its delegate calls.
    func start() {
        queue.async {
            self.manager = PeripheralManager(
                delegate: self, queue: self.queue,
                options: PeripheralManagerOptions(
                    restoreIdentifier: self.configuration.restoreIdentifier, adapter: self.configuration.adapter))
        }
    }

    /// Stops advertising and unpublishes the services; `done` runs on `queue`.
    func stop(_ done: @escaping @Sendable () -> Void) {
        queue.async {
            self.metronome?.cancel()
            self.manager?.stopAdvertising()
            self.manager?.removeAllServices()
            // The two calls above are asynchronous; give them a moment to reach bluetoothd.
            self.queue.asyncAfter(deadline: .now() + .milliseconds(300), execute: done)
        }
    }

    private func makeServices() -> [MutableService] {
        let heartRate = MutableService(type: HeartRateProfile.service, primary: true)
        let location = MutableCharacteristic(
            type: HeartRateProfile.bodySensorLocation, properties: [.read], value: Data([0x01]),
            permissions: [.readable])
        heartRate.characteristics = [measurement, location, controlPoint]
        let information = MutableService(type: HeartRateProfile.deviceInformation, primary: true)
        information.characteristics = [
            MutableCharacteristic(
                type: HeartRateProfile.manufacturerName, properties: [.read], value: Data("BlueZKit".utf8),
                permissions: [.readable]),
            MutableCharacteristic(
                type: HeartRateProfile.modelNumber, properties: [.read], value: Data("HRM-1".utf8),
                permissions: [.readable]),
        ]
        let battery = MutableService(type: HeartRateProfile.battery, primary: true)
        battery.characteristics = [batteryLevel]
        return [heartRate, information, battery]
    }

    // MARK: PeripheralManagerDelegate

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        output.emit("state", ["state": "\(peripheral.state)"], human: "Bluetooth is \(peripheral.state)")
        guard peripheral.state == .poweredOn else { return }
        if published {
            // Restored: the manager publishes and advertises again by itself.
            return startMeasuring()
        }
        published = true
        for service in services { peripheral.add(service) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any]) {
        let restored = dict[CBPeripheralManagerRestoredStateServicesKey] as? [MutableService] ?? []
        let characteristics = restored.flatMap { ($0.characteristics as? [MutableCharacteristic]) ?? [] }
        func find(_ uuid: BluetoothUUID) -> MutableCharacteristic? { characteristics.first { $0.uuid == uuid } }
        // The centrals subscribed when the last process ended; bluetoothd ended their
        // subscriptions with it, so didUnsubscribeFrom follows for each, and they subscribe again.
        let subscribed = Set(characteristics.flatMap { $0.subscribedCentrals ?? [] }.map(\.identifier.uuidString))
        output.emit(
            "restored", ["services": restored.map { "\($0.uuid)" }, "subscribedCentrals": subscribed.sorted()],
            human: "Restored \(restored.count) published services (\(subscribed.count) centrals were subscribed)")
        // Take over the restored objects: updates and requests refer to them from now on.
        guard let measurement = find(HeartRateProfile.measurement),
            let controlPoint = find(HeartRateProfile.controlPoint),
            let batteryLevel = find(HeartRateProfile.batteryLevel)
        else { return }
        self.measurement = measurement
        self.controlPoint = controlPoint
        self.batteryLevel = batteryLevel
        services = restored
        published = true
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        if let error {
            return output.error("could not publish \(service.uuid): \(error)")
        }
        servicesAdded += 1
        guard servicesAdded == services.count else { return }
        peripheral.startAdvertising([
            CBAdvertisementDataLocalNameKey: configuration.name,
            CBAdvertisementDataServiceUUIDsKey: [HeartRateProfile.service],
        ])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        if let error { return output.error("could not advertise: \(error)") }
        output.emit(
            "advertising", ["name": configuration.name],
            human: "Advertising \"\(configuration.name)\" with the Heart Rate service")
        startMeasuring()
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        guard request.characteristic == batteryLevel else {
            return peripheral.respond(to: request, withResult: .requestNotSupported)
        }
        guard request.offset <= 1 else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = Data([battery]).dropFirst(request.offset)
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        for request in requests where request.characteristic != controlPoint {
            return peripheral.respond(to: first, withResult: .writeNotPermitted)
        }
        let value = requests.last?.value.map(Array.init) ?? []
        output.emit(
            "controlPoint", ["value": value.map(Int.init)],
            human: "Control point written: \(value.map { String(format: "0x%02X", $0) }.joined(separator: " "))")
        guard value == [HeartRateProfile.resetEnergyExpended] else {
            return peripheral.respond(to: first, withResult: .application(HeartRateProfile.controlPointNotSupported))
        }
        heartRate.resetEnergyExpended()
        peripheral.respond(to: first, withResult: .success)
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        output.emit(
            "subscribed", ["central": central.identifier.uuidString, "characteristic": "\(characteristic.uuid)"],
            human: "Central \(central.identifier.uuidString) subscribed to \(characteristic.uuid)")
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        output.emit(
            "unsubscribed", ["central": central.identifier.uuidString, "characteristic": "\(characteristic.uuid)"],
            human: "Central \(central.identifier.uuidString) unsubscribed from \(characteristic.uuid)")
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        guard let value = pending else { return }
        if peripheral.updateValue(value, for: measurement, onSubscribedCentrals: nil) { pending = nil }
    }

    // MARK: Measuring

    private func startMeasuring() {
        guard metronome == nil else { return }
        let metronome = Metronome(interval: configuration.interval, queue: queue) { [weak self] in self?.measure() }
        metronome.start()
        self.metronome = metronome
    }

    private func measure() {
        let reading = heartRate.next(elapsed: configuration.interval)
        if heartRate.count % 60 == 0, battery > 1 {
            battery -= 1
            manager.updateValue(Data([battery]), for: batteryLevel, onSubscribedCentrals: nil)
        }
        let subscribers = measurement.subscribedCentrals ?? []
        guard !subscribers.isEmpty else { return }
        let length = subscribers.map(\.maximumUpdateValueLength).min() ?? 20
        let value = reading.encoded(maximumLength: length)
        if pending != nil || !manager.updateValue(value, for: measurement, onSubscribedCentrals: nil) {
            // Back-pressure: keep only the newest measurement; isReady sends it.
            pending = value
            return
        }
        output.emit(notified: reading, centrals: subscribers.count)
    }
}
