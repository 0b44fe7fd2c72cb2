import BlueZKit
import BlueZKitTesting
import Foundation
import Locking
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct CentralManagerRetrieveTests {
    @Test func retrievesKnownPeripheralsByIdentifierAcrossManagers() async throws {
        let fixture = try await CentralFixture.make()
        try fixture.bluez.addPeripheral(CentralManagerScanTests.heartRateSensor())
        fixture.central.scanForPeripherals(withServices: nil)
        try await waitUntil("discovered") { !fixture.delegate.discoveries(named: "HRM").isEmpty }
        let identifier = try #require(fixture.delegate.discoveries(named: "HRM").first).peripheral.identifier
        // A new manager (a restarted app) finds the device bluetoothd remembers, without scanning.
        let delegate = RecordingCentralDelegate()
        let later = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("powered on") { later.state == .poweredOn }
        let unknown = UUID()
        let found = later.retrievePeripherals(withIdentifiers: [unknown, identifier])
        #expect(found.map(\.identifier) == [identifier])
        #expect(found.first?.name == "HRM")
        #expect(later.retrievePeripherals(withIdentifiers: [identifier]).first === found.first)
    }

    @Test func retrievesConnectedPeripheralsByService() async throws {
        // After service resolution bluetoothd's UUIDs are the resolved services, as in 5.66.
        let (fixture, _, peripheral, _, _) = try await CentralGATTTests.connectedSensor()
        try await waitUntil("services resolved and listed") {
            !fixture.central.retrieveConnectedPeripherals(withServices: [BluetoothUUID(0x180D)]).isEmpty
        }
        let connected = fixture.central.retrieveConnectedPeripherals(withServices: [BluetoothUUID(0x180D)])
        #expect(connected.first === peripheral)
        #expect(fixture.central.retrieveConnectedPeripherals(withServices: [BluetoothUUID(0xFFF0)]).isEmpty)
        fixture.central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected") { peripheral.state == .disconnected }
        #expect(fixture.central.retrieveConnectedPeripherals(withServices: [BluetoothUUID(0x180D)]).isEmpty)
    }

    final class RSSIRecorder: PeripheralDelegate, @unchecked Sendable {
        let results = PosixMutex<[String]>([])
        func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {
            let text = error.map { ($0 as? BluetoothError).map { "\($0.code)" } ?? "\($0)" } ?? "\(RSSI)"
            results.withLock { $0.append(text) }
        }
    }

    @Test func readsTheLastRSSIOrSaysThereIsNone() async throws {
        let fixture = try await CentralFixture.make()
        let (sensor, peripheral) = try await CentralManagerConnectTests.discoverSensor(fixture)
        let recorder = RSSIRecorder()
        peripheral.delegate = recorder
        fixture.central.scanForPeripherals(withServices: nil, options: ScanOptions(allowDuplicates: true))
        sensor.rssi = -47
        sensor.advertise()
        try await waitUntil("fresh RSSI") { fixture.delegate.discoveries(named: "HRM").last?.rssi == -47 }
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        peripheral.readRSSI()
        try await waitUntil("RSSI read") { recorder.results.withLock { $0.count } == 1 }
        #expect(recorder.results.withLock { $0 } == ["-47"])
        fixture.central.stopScan()
        // bluetoothd invalidates RSSI when discovery stops; the last one seen is still reported.
        try await waitUntil("discovery stopped") { fixture.bluez.adapters.first?.isDiscovering == false }
        peripheral.readRSSI()
        try await waitUntil("RSSI read again") { recorder.results.withLock { $0.count } == 2 }
        #expect(recorder.results.withLock { $0.last } == "-47")
        // A manager that never saw an advertisement from it has no RSSI to give.
        let delegate = RecordingCentralDelegate()
        let later = CentralManager(
            delegate: delegate, queue: delegate.queue,
            options: CentralManagerOptions(busAddress: fixture.bluez.busAddress))
        try await waitUntil("powered on") { later.state == .poweredOn }
        let retrieved = try #require(later.retrievePeripherals(withIdentifiers: [peripheral.identifier]).first)
        retrieved.delegate = recorder
        later.connect(retrieved)
        try await waitUntil("connected") { retrieved.state == .connected }
        retrieved.readRSSI()
        try await waitUntil("no RSSI") { recorder.results.withLock { $0.count } == 3 }
        #expect(recorder.results.withLock { $0.last } == "operationNotSupported")
    }

    /// Reads again from `didReadRSSI`, as iOS code does to follow the signal, `limit` times.
    final class RSSIFollower: PeripheralDelegate, @unchecked Sendable {
        let answers = PosixMutex<[ContinuousClock.Instant]>([])
        let limit: Int
        init(limit: Int) { self.limit = limit }
        func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {
            let count = answers.withLock {
                $0.append(.now)
                return $0.count
            }
            if count < limit { peripheral.readRSSI() }
        }
    }

    /// Answers are paced like a radio read's (at most one every 50 ms), so following the
    /// signal from `didReadRSSI` does not spin a core.
    @Test func readingAgainFromTheAnswerIsPaced() async throws {
        let fixture = try await CentralFixture.make()
        let (_, peripheral) = try await CentralManagerConnectTests.discoverSensor(fixture)
        fixture.central.connect(peripheral)
        try await waitUntil("connected") { peripheral.state == .connected }
        let follower = RSSIFollower(limit: 11)
        peripheral.delegate = follower
        let asked = ContinuousClock.now
        peripheral.readRSSI()
        try await waitUntil("11 answers", timeout: .seconds(20)) { follower.answers.withLock { $0.count } == 11 }
        let answers = follower.answers.withLock { $0 }
        // The eleventh answer is due ten intervals (500 ms) after the first read at the earliest; load
        // only adds. 450: the timer and the clock read here are not the same clock.
        #expect(answers[10] - asked >= .milliseconds(450))
    }

    /// Code written with Core Bluetooth's names compiles unchanged.
    @Test func coreBluetoothNamesCompile() {
        final class Ported: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate {
            func centralManagerDidUpdateState(_ central: CBCentralManager) {
                if central.state == .poweredOn {
                    central.scanForPeripherals(
                        withServices: [CBUUID(string: "180D")],
                        options: [CBCentralManagerScanOptionAllowDuplicatesKey: false])
                }
            }
            func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: (any Error)?) {
                for service in peripheral.services ?? [] { peripheral.discoverCharacteristics(nil, for: service) }
            }
        }
        let state: CBPeripheralState = .disconnected
        #expect(state == .disconnected)
        #expect(Ported().isKind(of: Ported.self))
    }
}
