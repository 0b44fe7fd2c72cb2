import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// How many virtual controllers the guest has (`bluez-vm run --controllers`; `Scripts/test-e2e` boots 4).
let emulatedControllers = Int(ProcessInfo.processInfo.environment["BLUEZKIT_CONTROLLERS"] ?? "") ?? 2
/// The bluetoothd the guest runs (`bluez-vm run --bluez`).
let emulatedBlueZVersion = ProcessInfo.processInfo.environment["BLUEZKIT_BLUEZ_VERSION"] ?? "5.66"

/// Whether the guest's bluetoothd is `version` or newer, compared numerically ("5.9" < "5.82" < "5.87").
func emulatedBlueZ(atLeast version: String) -> Bool {
    func numbers(_ v: String) -> [Int] { v.split(separator: ".").map { Int($0) ?? 0 } }
    return !numbers(emulatedBlueZVersion).lexicographicallyPrecedes(numbers(version))
}

extension EndToEndTests {
    static let perCentralService = BluetoothUUID(string: "5A1E0101-B1E2-4C00-9E00-000000000001")
    static let perCentralValue = BluetoothUUID(string: "5A1E0102-B1E2-4C00-9E00-000000000001")

    static let throwawayService = BluetoothUUID(string: "5A1E0201-B1E2-4C00-9E00-000000000001")

    /// Two of our centrals (hci0 and hci2) subscribe to our peripheral on hci1. On a bluetoothd
    /// with per-device notify sockets (5.82 and newer), each is reported by name and gets exactly
    /// what was sent to it; on 5.66, every value reaches both (documented in Core Bluetooth differences).
    ///
    /// Needs four controllers (`Scripts/test-e2e` boots four; skipped with fewer): btvirt
    /// (BlueZ's emulator, 5.66 as 5.82) numbers connection handles per controller but tells the
    /// peripheral the central's handle (`le_conn_complete` in `emulator/btdev.c`) and passes ACL
    /// data on under the sender's handle. When hci1 has a link to hci0 (handle 42 on both) and
    /// hci2 connects, hci1 is told 42 again: its replies to hci2 reach hci0, whose bluetoothd
    /// closes the ATT channel ("Received unexpected ATT response") and both links drop — with
    /// bluetoothctl and BlueZ's example server alone, no BlueZKit involved. So hci2 first holds
    /// a link to hci3: its link to hci1 then has handle 43 at both ends, as hci1's second link
    /// does, and the handles agree.
    @Test(
        .enabled(if: emulatedControllers >= 4, "needs hci2 and hci3: Scripts/test-e2e --controllers 4"),
        .loadScaledTimeLimit(minutes: 4))
    func eachCentralGetsWhatWasSentToIt() async throws {
        let perDevice = emulatedBlueZ(atLeast: "5.82")
        try await ExamplePeripheral.forgetKnownDevices()
        let throwaway = try await Self.holdThrowawayLink(from: "hci2", to: "hci3")
        let server = PerCentralPeripheralDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let value = MutableCharacteristic(
            type: Self.perCentralValue, properties: [.notify], value: nil, permissions: [])
        let service = MutableService(type: Self.perCentralService, primary: true)
        service.characteristics = [value]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.added }

        var centrals: [(CentralManager, E2ECentralDelegate)] = []
        for adapter in ["hci0", "hci2"] {
            let delegate = E2ECentralDelegate()
            let central = CentralManager(
                delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: adapter))
            try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { central.state == .poweredOn }
            central.scanForPeripherals(withServices: [Self.perCentralService])
            try await waitUntil("\(adapter) scanning") { central.isScanning }
            centrals.append((central, delegate))
        }
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [Self.perCentralService]])
        for (central, delegate) in centrals {
            try await waitUntil("discovered", timeout: .seconds(60)) { delegate.discovered != nil }
            central.stopScan()
        }

        // One at a time, so that even 5.66's inferred subscriptions are exact.
        var remotes: [(Peripheral, Characteristic, E2EPeripheralDelegate, Central)] = []
        for (index, (central, delegate)) in centrals.enumerated() {
            let peripheral = try #require(delegate.discovered)
            let recorder = E2EPeripheralDelegate()
            peripheral.delegate = recorder
            central.connect(peripheral)
            try await waitUntil("connected \(index)", timeout: .seconds(60)) { peripheral.state == .connected }
            peripheral.discoverServices([Self.perCentralService])
            try await waitUntil("services \(index)", timeout: .seconds(30)) { recorder.count("services") == 1 }
            let remoteService = try #require(peripheral.services?.first)
            peripheral.discoverCharacteristics([Self.perCentralValue], for: remoteService)
            try await waitUntil("characteristics \(index)") { recorder.count("characteristics") == 1 }
            let characteristic = try #require(remoteService.characteristics?.first)
            peripheral.setNotifyValue(true, for: characteristic)
            try await waitUntil("subscribed \(index)", timeout: .seconds(30)) {
                server.subscribed.count == index + 1
            }
            remotes.append((peripheral, characteristic, recorder, server.subscribed[index]))
        }
        #expect(Set(remotes.map(\.3.identifier)).count == 2, "two centrals told apart")
        if perDevice {
            // The MTU comes with each central's socket.
            for remote in remotes { #expect(remote.3.maximumUpdateValueLength > 20) }
        }

        func values(_ index: Int) -> [String] {
            remotes[index].2.events.filter { $0.hasPrefix("value ") }.map { String($0.suffix(2)) }
        }
        let first = remotes[0].3
        let second = remotes[1].3
        try await waitUntil("sent to the first") {
            manager.updateValue(Data([0xA0]), for: value, onSubscribedCentrals: [first])
        }
        try await waitUntil("sent to the second") {
            manager.updateValue(Data([0xB0]), for: value, onSubscribedCentrals: [second])
        }
        try await waitUntil("sent to both") { manager.updateValue(Data([0xFF]), for: value, onSubscribedCentrals: nil) }
        try await waitUntil("both got the value for all", timeout: .seconds(30)) {
            values(0).contains("ff") && values(1).contains("ff")
        }
        if perDevice {
            #expect(values(0) == ["a0", "ff"])
            #expect(values(1) == ["b0", "ff"])

            // The first unsubscribes: exactly it is reported, and the next value reaches the second only.
            remotes[0].0.setNotifyValue(false, for: remotes[0].1)
            try await waitUntil("unsubscribed", timeout: .seconds(30)) { server.unsubscribed.count == 1 }
            #expect(server.unsubscribed.map(\.identifier) == [first.identifier])
            try await waitUntil("sent after") {
                manager.updateValue(Data([0xCC]), for: value, onSubscribedCentrals: nil)
            }
            try await waitUntil("the second got it", timeout: .seconds(30)) { values(1).last == "cc" }
            #expect(values(0) == ["a0", "ff"])
        } else {
            // bluetoothd 5.66 sends every value to every subscriber.
            try await waitUntil("5.66: everyone got everything", timeout: .seconds(30)) {
                Set(values(0)) == ["a0", "b0", "ff"] && Set(values(1)) == ["a0", "b0", "ff"]
            }
        }
        for (index, (central, _)) in centrals.enumerated() {
            central.cancelPeripheralConnection(remotes[index].0)
        }
        // The links go down before the next test: a released manager does not wait for them.
        try await waitUntil("disconnected", timeout: .seconds(30)) {
            remotes.allSatisfy { $0.0.state == .disconnected }
        }
        manager.stopAdvertising()
        manager.removeAllServices()
        try await throwaway.release()
    }

    /// A link from `central` to a peripheral on `peripheral`, held until `release()`: it takes
    /// handle 42 on both controllers (see `eachCentralGetsWhatWasSentToIt`).
    struct ThrowawayLink {
        let manager: PeripheralManager
        let server: PerCentralPeripheralDelegate
        let central: CentralManager
        let delegate: E2ECentralDelegate
        let peripheral: Peripheral

        func release() async throws {
            central.cancelPeripheralConnection(peripheral)
            try await waitUntil("throwaway link down", timeout: .seconds(30)) { peripheral.state == .disconnected }
            manager.stopAdvertising()
            manager.removeAllServices()
        }
    }

    static func holdThrowawayLink(from centralAdapter: String, to peripheralAdapter: String) async throws
        -> ThrowawayLink
    {
        let server = PerCentralPeripheralDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: peripheralAdapter))
        try await waitUntil("\(peripheralAdapter) powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let service = MutableService(type: throwawayService, primary: true)
        manager.add(service)
        try await waitUntil("throwaway service added", timeout: .seconds(30)) { server.added }
        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: centralAdapter))
        try await waitUntil("\(centralAdapter) powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [throwawayService])
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [throwawayService]])
        try await waitUntil("throwaway peripheral discovered", timeout: .seconds(60)) { delegate.discovered != nil }
        central.stopScan()
        let peripheral = try #require(delegate.discovered)
        central.connect(peripheral)
        try await waitUntil("throwaway link up", timeout: .seconds(60)) { peripheral.state == .connected }
        manager.stopAdvertising()
        return ThrowawayLink(
            manager: manager, server: server, central: central, delegate: delegate, peripheral: peripheral)
    }
}

final class PerCentralPeripheralDelegate: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.per-central")
    private let state = Mutex<(added: Bool, subscribed: [Central], unsubscribed: [Central])>((false, [], []))
    var added: Bool { state.withLock { $0.added } }
    var subscribed: [Central] { state.withLock { $0.subscribed } }
    var unsubscribed: [Central] { state.withLock { $0.unsubscribed } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        state.withLock { $0.added = error == nil }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        state.withLock { $0.subscribed.append(central) }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        state.withLock { $0.unsubscribed.append(central) }
    }
}
