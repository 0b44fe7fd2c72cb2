import BlueZKit
import BluetoothdConformance
import Foundation
import TestSupport
import Testing

/// The ServicesResolved race (BlueZ issue 1489, bleak issue 1806), against the real bluetoothd:
/// README's row "The ServicesResolved race". In the serialized end-to-end suite.
///
/// bluetoothd exports a resolved database in one turn of its main loop and then sends the
/// device's `ServicesResolved` true and every object's `InterfacesAdded`, in an order that is not
/// fixed (see `GATTConformance`). With `Scripts/guest/bumble_large_database.py`'s database (30
/// services of 4 characteristics, about 200 objects, its Read By Type answers slowed), a client
/// that takes the objects it has been told of when `ServicesResolved` arrives gets part of the
/// database. btvirt's peers (BlueZ's example server) have a handful of objects, too few to open
/// that window; Bumble's server can hold any number.
extension EndToEndTests {
    static let largeDatabaseServices = 30
    static let largeDatabaseCharacteristics = 4
    static let largeDatabaseControl = BluetoothUUID(string: "5A1E0DFF-B1E2-4C00-9E00-000000000001")
    static let largeDatabaseAbruptControl = BluetoothUUID(string: "5A1E0DFE-B1E2-4C00-9E00-000000000001")

    static func largeDatabaseService(_ index: Int) -> BluetoothUUID {
        BluetoothUUID(string: String(format: "5A1E%04X-B1E2-4C00-9E00-000000000001", 0x0D00 + index))
    }

    static func largeDatabaseCharacteristic(_ service: Int, _ index: Int) -> BluetoothUUID {
        BluetoothUUID(string: String(format: "5A1E%04X-B1E2-4C00-9E00-000000000001", 0x0E00 + service * 16 + index))
    }

    /// Our central connects to the large database as a device bluetoothd has never resolved,
    /// while another client keeps bluetoothd busy with `Properties.Get` calls (as on a gateway
    /// where other programs poll bluetoothd); then once more to the database bluetoothd cached.
    /// Each time, `discoverServices` returns every service, each service every characteristic,
    /// and the values and descriptors are the peer's. Beside it, a second bus connection records
    /// bluetoothd's signals, to say whether `ServicesResolved` came before the last object was
    /// announced (the race) on that link.
    ///
    /// Why a busy bus forces the race: gdbus (bluetoothd's D-Bus layer) holds signals until its
    /// idle handler runs, then sends them object by object in the order the objects were last
    /// touched: the device last, so `ServicesResolved` after the services. But a reply sent
    /// before the idle handler runs (a method call that was waiting) first sends everything held,
    /// in the order the objects were first touched: the device's `UUIDs` first, so
    /// `ServicesResolved` ahead of the objects.
    @Test(.enabled(if: BumblePeer.available, BumblePeer.unavailable), .loadScaledTimeLimit(minutes: 10))
    func ourCentralSeesTheWholeDatabaseWhateverTheOrderOfBluetoothdsSignals() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let adapter = try #require(BumblePeer.adapters.first)
        let bluetoothd = GuestBluetoothd.underTest(adapter: adapter)
        let observer = try await BlueZCalls.open(bluetoothd, label: "race.observer")
        defer { observer.close() }
        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: adapter))
        try await waitUntil("\(adapter) powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        let bumble = try BumblePeer.start(
            "bumble_large_database.py",
            [
                "--services", "\(Self.largeDatabaseServices)", "--characteristics",
                "\(Self.largeDatabaseCharacteristics)", "--delay-ms", "20", "--timeout", "560",
            ])
        try await bumble.waitForEvents("database", timeout: .seconds(90))

        var raced: [Bool?] = []
        var peripheral: Peripheral?
        for attempt in 1...Self.largeDatabaseFirstLinks {
            let round = "first link \(attempt), nothing cached"
            if let known = peripheral {
                try await observer.forgetDevice(bluetoothd.devicePath(try #require(known.address)), on: bluetoothd)
            }
            delegate.forgetDiscovered()
            central.scanForPeripherals(withServices: [Self.largeDatabaseService(0)])
            try await pollUntil("discovered (\(round))", timeout: .seconds(60), diagnostics: bumble.diagnostics) {
                delegate.discovered != nil
            }
            central.stopScan()
            let found = try #require(delegate.discovered)
            peripheral = found
            let busy = try await BusyBus.start(bluetoothd, connections: 4, calls: 16)
            let outcome = try await connectAndCheckLargeDatabase(found, central, observer, bluetoothd, round: round)
            await busy.stop()
            raced.append(outcome)
            if outcome == true { break }
        }
        let cached = try #require(peripheral)
        raced.append(
            try await connectAndCheckLargeDatabase(
                cached, central, observer, bluetoothd, round: "second link, database cached", endsAbruptly: true))
        print("ServicesResolved before the last object's InterfacesAdded (nil: none announced): \(raced)")
        // Forced at the first link on 5.66, 5.82 and 5.87 on a quiet machine, but only in some
        // links when the machine is loaded (CI runs three guests at once): the race is a matter
        // of timing, and not forcing it says nothing about the library.
        withKnownIssue("the busy bus did not bring ServicesResolved ahead of the objects", isIntermittent: true) {
            #expect(
                raced.contains(true),
                "not in \(Self.largeDatabaseFirstLinks) links: \(raced)")
        }
        #expect(bumble.events("error").isEmpty, "\(bumble.diagnostics())")
        _ = try await bumble.stop()
    }

    static let largeDatabaseFirstLinks = 3

    /// Connects, checks the whole database, lets the peer end the link; returns whether
    /// `ServicesResolved` came first (nil: no object announced on that link).
    ///
    /// When the peer ends the link `abruptly`, it does so instead of answering our write. Core
    /// Bluetooth reports such a write as `peripheralDisconnected`; so does BlueZKit where
    /// bluetoothd says why the link ended (5.84 and later). Older bluetoothd fails the write with
    /// ATT 0x0E and says nothing more, exactly as when pairing fails (the kernel ends the link),
    /// and BlueZKit reports `pairingFailed` (documented in Core Bluetooth differences).
    private func connectAndCheckLargeDatabase(
        _ peripheral: Peripheral, _ central: CentralManager, _ observer: BlueZCalls, _ bluetoothd: BluetoothdUnderTest,
        round: String, endsAbruptly: Bool = false
    ) async throws -> Bool? {
        let mark = observer.mark
        try await central.connect(to: peripheral)
        let services = try await peripheral.discoverServices(matching: nil)
        try await checkLargeDatabase(services, on: peripheral, round: round)
        let devicePath = bluetoothd.devicePath(try #require(peripheral.address))
        let raced = try await servicesResolvedCameFirst(observer, since: mark, device: devicePath)

        // The peer ends the link (its control characteristic) and advertises again.
        let controlService = try #require(services.first { $0.uuid == Self.largeDatabaseService(0xFF) })
        let uuid = endsAbruptly ? Self.largeDatabaseAbruptControl : Self.largeDatabaseControl
        let control = try #require(
            try await peripheral.discoverCharacteristics(matching: [uuid], in: controlService).first)
        if endsAbruptly {
            let error = await #expect(throws: BluetoothError.self) {
                try await peripheral.writeValue(Data([1]), to: control)
            }
            let expected: BluetoothError.Code =
                GuestBluetoothd.version >= .init(5, 84) ? .peripheralDisconnected : .pairingFailed
            #expect(error?.code == expected, "\(round): \(String(describing: error))")
        } else {
            try await peripheral.writeValue(Data([1]), to: control)
        }
        try await waitUntil("the peer ended the link (\(round))", timeout: .seconds(60)) {
            peripheral.state == .disconnected
        }
        return raced
    }

    /// Every service of the peer, once; each with its characteristics; values and descriptors.
    private func checkLargeDatabase(_ services: [Service], on peripheral: Peripheral, round: String) async throws {
        let expected =
            (0..<Self.largeDatabaseServices).map(Self.largeDatabaseService) + [Self.largeDatabaseService(0xFF)]
        let found = services.map(\.uuid).filter { $0.uuidString.hasPrefix("5A1E0D") }
        #expect(found.sorted { $0.uuidString < $1.uuidString } == expected, "\(round): services \(found)")
        for index in 0..<Self.largeDatabaseServices {
            let service = try #require(services.first { $0.uuid == Self.largeDatabaseService(index) }, "\(round)")
            let characteristics = try await peripheral.discoverCharacteristics(matching: nil, in: service)
            let wanted = (0..<Self.largeDatabaseCharacteristics).map { Self.largeDatabaseCharacteristic(index, $0) }
            #expect(Set(characteristics.map(\.uuid)) == Set(wanted), "\(round): service \(index)")
            #expect(characteristics.count == wanted.count, "\(round): service \(index)")
            // The last characteristic's value, and the first one's descriptors, in the first
            // and the last service (each service's are the peer's; a round trip each).
            guard index == 0 || index == Self.largeDatabaseServices - 1 else { continue }
            if let last = characteristics.first(where: { $0.uuid == wanted.last }) {
                let value = try await peripheral.readValue(of: last)
                #expect(value == Data([UInt8(index), UInt8(wanted.count - 1)]), "\(round): service \(index)")
            }
            if let first = characteristics.first(where: { $0.uuid == wanted.first }) {
                let descriptors = try await peripheral.discoverDescriptors(of: first)
                #expect(
                    Set(descriptors.map(\.uuid)) == [BluetoothUUID(string: "2902"), BluetoothUUID(string: "2901")],
                    "\(round): service \(index)")
            }
        }
    }

    /// Whether bluetoothd's `ServicesResolved` true for `device` came before the last
    /// `InterfacesAdded` of an object under it, among the signals since `mark`; nil when no
    /// object was announced (bluetoothd kept the objects of the last link).
    private func servicesResolvedCameFirst(_ observer: BlueZCalls, since mark: Int, device: String) async throws
        -> Bool?
    {
        _ = try await observer.waitForSignal(from: mark, "ServicesResolved true", timeout: .seconds(60)) {
            $0.changes(device, "org.bluez.Device1", "ServicesResolved", to: .bool(true))
        }
        let signals = observer.signals(since: mark)
        let resolved = try #require(
            signals.firstIndex { $0.changes(device, "org.bluez.Device1", "ServicesResolved", to: .bool(true)) })
        guard
            let lastAdded = signals.lastIndex(where: {
                $0.member == "InterfacesAdded" && $0.objectPath.hasPrefix(device + "/")
            })
        else { return nil }
        return resolved < lastAdded
    }
}

/// Other clients of bluetoothd (`connections` bus connections) that keep `calls` `Properties.Get`
/// of the adapter's `Address` in flight each until they are stopped: several connections, so that
/// one's turnaround is another's call in bluetoothd's queue.
private struct BusyBus {
    let clients: [BlueZCalls]
    let task: Task<Int, Never>

    static func start(_ bluetoothd: BluetoothdUnderTest, connections: Int, calls: Int) async throws -> BusyBus {
        var clients: [BlueZCalls] = []
        for index in 0..<connections {
            clients.append(try await BlueZCalls.open(bluetoothd, label: "race.busy\(index)"))
        }
        let task = Task { [clients] in
            await withTaskGroup(of: Int.self) { group in
                for client in clients {
                    for _ in 0..<calls {
                        group.addTask {
                            var made = 0
                            while !Task.isCancelled {
                                _ = await client.property(bluetoothd.adapterPath, "org.bluez.Adapter1", "Address")
                                made += 1
                            }
                            return made
                        }
                    }
                }
                return await group.reduce(0, +)
            }
        }
        return BusyBus(clients: clients, task: task)
    }

    func stop() async {
        task.cancel()
        let made = await task.value
        print("busy bus: \(made) calls")
        for client in clients { client.close() }
    }
}
