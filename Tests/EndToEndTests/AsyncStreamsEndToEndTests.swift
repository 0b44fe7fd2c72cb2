import BlueZKit
import Dispatch
import Foundation
import TestSupport
import Testing

/// The async API alone, with no delegate, against the real bluetoothd: the state streams, the
/// central's `disconnections()`, the peripheral's `subscriptions()`, and the async stop and
/// removal. In the serialized end-to-end suite (both tests use hci0/hci1 or the Bumble adapter).
extension EndToEndTests {
    static let asyncService = BluetoothUUID(string: "5A1E0020-B1E2-4C00-9E00-000000000001")
    static let asyncMeasurement = BluetoothUUID(string: "5A1E0021-B1E2-4C00-9E00-000000000001")
    static let asyncName = BluetoothUUID(string: "5A1E0022-B1E2-4C00-9E00-000000000001")

    /// Our central, async only, on the Bumble-backed adapter: it waits for `.poweredOn` in
    /// `states()`, finds the Bumble peer in `discoveries()`, connects, writes the peer's trigger,
    /// and the peer ends the link: `disconnections()` yields it, with an error. Releasing the
    /// manager then finishes both streams.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 4))
    func theAsyncCentralHearsThePeerGoInDisconnections() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let states: Collected<ManagerState>
        let disconnections: Collected<CentralManager.Disconnection>
        let peer: ExampleProgram
        do {
            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "e2e.async.central"),
                options: CentralManagerOptions(adapter: adapter))
            states = Collected(central.states())
            disconnections = Collected(central.disconnections())
            try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { states.values.last == .poweredOn }
            let discoveries = Collected(central.discoveries())
            central.scanForPeripherals(withServices: [Self.faultyService])
            peer = try BumblePeer.start("bumble_disconnector.py", ["--timeout", "200"])
            try await peer.waitForEvents("advertising", timeout: .seconds(90))
            try await pollUntil("found the peer", timeout: .seconds(60), diagnostics: peer.diagnostics) {
                !discoveries.values.isEmpty
            }
            central.stopScan()
            discoveries.cancel()
            let peripheral = try #require(discoveries.values.first?.peripheral)
            defer { central.cancelPeripheralConnection(peripheral) }
            try await central.connect(to: peripheral)
            let service = try #require(try await peripheral.discoverServices(matching: [Self.faultyService]).first)
            let trigger = try #require(
                try await peripheral.discoverCharacteristics(matching: [Self.faultyFirst], in: service).first)
            try await peripheral.writeValue(Data([0x01]), to: trigger)
            try await pollUntil("the peer went", timeout: .seconds(60), diagnostics: peer.diagnostics) {
                !disconnections.values.isEmpty
            }
            let gone = try #require(disconnections.values.first)
            #expect(gone.peripheral === peripheral)
            #expect(gone.error != nil, "the peer ended the link: an error, not a cancel")
            #expect(!gone.isReconnecting)
            #expect(peripheral.state == .disconnected)
            #expect(disconnections.values.count == 1)
            #expect(!states.isFinished && !disconnections.isFinished)
        }
        try await waitUntil("states() finished with the manager") { states.isFinished }
        try await waitUntil("disconnections() finished with the manager") { disconnections.isFinished }
        #expect(states.values.last == .poweredOn)
        try await peer.waitForEvents("disconnecting", timeout: .seconds(10))
    }

    /// Our peripheral on hci1, async only and without a delegate: it waits for `.poweredOn` in
    /// `states()`, publishes and advertises; our central on hci0 reads, then subscribes with
    /// `notifications(of:)`, and `subscriptions()` names the central; a value sent to that central
    /// arrives; the central unsubscribes with `setNotifyValue(false, of:)`, and `subscriptions()`
    /// reports the unsubscription by the same central. `stopAdvertisingAndWait()` returns with bluetoothd holding no advertisement
    /// of hci1 (`ActiveInstances` 0), and releasing the manager finishes its streams.
    @Test(.loadScaledTimeLimit(minutes: 4)) func theAsyncPeripheralHearsSubscriptionsInItsStream() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let states: Collected<ManagerState>
        let subscriptions: Collected<PeripheralManager.Subscription>
        do {
            let manager = PeripheralManager(
                delegate: nil, queue: DispatchQueue(label: "e2e.async.peripheral"),
                options: PeripheralManagerOptions(adapter: "hci1"))
            states = Collected(manager.states())
            subscriptions = Collected(manager.subscriptions())
            try await waitUntil("hci1 powered on", timeout: .seconds(30)) { states.values.last == .poweredOn }
            let measurement = MutableCharacteristic(
                type: Self.asyncMeasurement, properties: [.notify], value: nil, permissions: [])
            let name = MutableCharacteristic(
                type: Self.asyncName, properties: [.read], value: Data("async".utf8), permissions: [.readable])
            let service = MutableService(type: Self.asyncService, primary: true)
            service.characteristics = [measurement, name]
            try await manager.addService(service)
            try await manager.startAdvertising(with: AdvertisementData(serviceUUIDs: [Self.asyncService]))

            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "e2e.async.central"),
                options: CentralManagerOptions(adapter: "hci0"))
            let centralStates = Collected(central.states())
            try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralStates.values.last == .poweredOn }
            let discoveries = Collected(central.discoveries())
            central.scanForPeripherals(withServices: [Self.asyncService])
            try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { !discoveries.values.isEmpty }
            central.stopScan()
            let peripheral = try #require(discoveries.values.first?.peripheral)
            defer { central.cancelPeripheralConnection(peripheral) }
            try await central.connect(to: peripheral)
            let remote = try #require(try await peripheral.discoverServices(matching: [Self.asyncService]).first)
            let found = try await peripheral.discoverCharacteristics(matching: nil, in: remote)
            let remoteMeasurement = try #require(found.first { $0.uuid == Self.asyncMeasurement })
            let remoteName = try #require(found.first { $0.uuid == Self.asyncName })
            // A request first: bluetoothd before 5.79 names no central in StartNotify, and the
            // manager attributes the subscription to the central it last heard from.
            #expect(try await peripheral.readValue(of: remoteName) == Data("async".utf8))

            let values = Collected(peripheral.notifications(of: remoteMeasurement))
            try await waitUntil("subscribed", timeout: .seconds(30)) { !subscriptions.values.isEmpty }
            let subscribed = try #require(subscriptions.values.first)
            #expect(subscribed.isSubscribed)
            #expect(subscribed.characteristic === measurement)
            try await manager.send(Data([0x2A]), for: measurement, onSubscribedCentrals: [subscribed.central])
            try await waitUntil("the value arrived", timeout: .seconds(30)) { values.values == [Data([0x2A])] }

            try await peripheral.setNotifyValue(false, of: remoteMeasurement)
            #expect(!remoteMeasurement.isNotifying)
            values.cancel()
            try await waitUntil("unsubscribed", timeout: .seconds(30)) { subscriptions.values.count == 2 }
            let unsubscribed = subscriptions.values[1]
            #expect(!unsubscribed.isSubscribed)
            #expect(unsubscribed.central == subscribed.central)
            #expect(unsubscribed.characteristic === measurement)

            try await central.disconnect(from: peripheral)
            await manager.stopAdvertisingAndWait()
            #expect(!manager.isAdvertising)
            #expect(try await Self.activeAdvertisements(on: "hci1") == 0)
            await manager.removeService(service)
            #expect(!states.isFinished && !subscriptions.isFinished)
        }
        try await waitUntil("states() finished with the manager") { states.isFinished }
        try await waitUntil("subscriptions() finished with the manager") { subscriptions.isFinished }
        #expect(states.values.last == .poweredOn)
    }

    /// How many advertisements bluetoothd holds for `adapter` (`LEAdvertisingManager1.ActiveInstances`).
    static func activeAdvertisements(on adapter: String) async throws -> Int {
        let text = try await Tool.output(
            "/usr/bin/busctl",
            [
                "get-property", "org.bluez", "/org/bluez/\(adapter)", "org.bluez.LEAdvertisingManager1",
                "ActiveInstances",
            ])
        // y 0
        return try #require(
            text.split(separator: " ").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
    }
}
