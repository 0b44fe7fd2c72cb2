import BlueZKitTesting
import DBus
import Locking
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `AcquireNotify` and `AcquireWrite` of remote characteristics, as bluetoothd 5.66 serves them.
///
/// Serialized: the descriptor-leak test counts the process's `SOCK_SEQPACKET` sockets, and
/// only these tests make them.
@Suite(.serialized, .timeLimit(.minutes(5))) struct AcquireTests {
    static let noOptions = filter([:])

    // MARK: Notify

    @Test func acquiredNotificationsArriveAsDatagramsInOrder() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let path = HeartRateSensor.measurementPath
        #expect(try await rig.client.property(path, characteristicInterface, "NotifyAcquired") == .bool(false))
        let mark = rig.client.signals.count
        let (socket, serial) = try await ClientSocket.acquireWithSerial(rig.client, path, "AcquireNotify")
        defer { socket.close() }
        #expect(socket.mtu == 517)
        #expect(try await rig.client.property(path, characteristicInterface, "MTU") == .uint16(517))
        let acquired = await rig.client.signals.expect(from: mark, "NotifyAcquired true") {
            $0.changes(path, characteristicInterface, "NotifyAcquired", to: .bool(true))
        }
        #expect(try #require(acquired).serial < serial)
        // The CCCD is on, but an acquired session does not turn Notifying true (5.66).
        #expect(sensor.measurement.isNotifying)
        #expect(try await rig.client.property(path, characteristicInterface, "Notifying") == .bool(false))
        let cccd = try await rig.client.call(
            HeartRateSensor.measurementCCCD, descriptorInterface, "ReadValue", [Self.noOptions])
        #expect(cccd.first == .bytes([1, 0]))

        let values = (0..<100).map { [0x06, UInt8($0)] as [UInt8] }
        for value in values { #expect(sensor.measurement.notify(value)) }
        var received: [ClientSocket.Received] = []
        for _ in values { received.append(await socket.receive()) }
        #expect(received == values.map { .datagram($0) })
        #expect(await socket.receive(timeout: .milliseconds(50)) == .nothing)
        // No Value signal and no cached value: the socket replaced them.
        #expect(try await rig.client.property(path, characteristicInterface, "Value") == .bytes([]))
        #expect(!rig.client.signals.since(mark).contains { $0.changes(path, characteristicInterface, "Value") })

        let closing = rig.client.signals.count
        socket.close()
        _ = await rig.client.signals.expect(from: closing, "NotifyAcquired false") {
            $0.changes(path, characteristicInterface, "NotifyAcquired", to: .bool(false))
        }
        #expect(!sensor.measurement.isNotifying)
        #expect(!rig.client.signals.since(closing).contains { $0.changes(path, characteristicInterface, "Notifying") })
    }

    @Test func acquiredPropertiesExistForTheirCharacteristicPropertyOnly() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let notifier = try await rig.client.properties(try probe.path(probe.notifier), characteristicInterface)
        #expect(notifier["NotifyAcquired"] == .bool(false))
        #expect(notifier["WriteAcquired"] == nil)
        let indicator = try await rig.client.properties(try probe.path(probe.indicator), characteristicInterface)
        #expect(indicator["NotifyAcquired"] == nil)
        #expect(indicator["Notifying"] == .bool(false))
        let command = try await rig.client.properties(try probe.path(probe.command), characteristicInterface)
        #expect(command["WriteAcquired"] == .bool(false))
        #expect(command["NotifyAcquired"] == nil)
        let dual = try await rig.client.properties(try probe.path(probe.dual), characteristicInterface)
        #expect(dual["WriteAcquired"] == .bool(false))
        #expect(dual["NotifyAcquired"] == .bool(false))
        let plain = try await rig.client.properties(try probe.path(probe.data), characteristicInterface)
        #expect(plain["WriteAcquired"] == nil)
        #expect(plain["NotifyAcquired"] == nil)
    }

    @Test func acquireNotifyErrorsFollowBlueZ() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let other = try await BlueZClient(address: rig.bluez.busAddress)
        defer { other.close() }
        let notifier = try probe.path(probe.notifier)
        let indicator = try probe.path(probe.indicator)

        let unsupported = await rig.client.error(
            try probe.path(probe.data), characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(unsupported?.name == "org.bluez.Error.NotSupported")
        let indicateOnly = await rig.client.error(indicator, characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(indicateOnly?.name == "org.bluez.Error.NotSupported")
        // Any session counts, and 5.66 checks the sessions before the properties.
        try await other.call(indicator, characteristicInterface, "StartNotify")
        let busy = await rig.client.error(indicator, characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(busy?.name == "org.bluez.Error.InProgress")
        #expect(busy?.message == "In Progress")

        let socket = try await ClientSocket.acquire(rig.client, notifier, "AcquireNotify")
        defer { socket.close() }
        for client in [rig.client, other] {
            let again = await client.error(notifier, characteristicInterface, "AcquireNotify", [Self.noOptions])
            #expect(again?.name == "org.bluez.Error.NotPermitted")
            #expect(again?.message == "Notify acquired")
        }

        try await rig.client.call(probe.devicePath, deviceInterface, "Disconnect")
        let disconnected = await rig.client.error(
            try probe.path(probe.dual), characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(disconnected?.name == "org.bluez.Error.Failed")
        #expect(disconnected?.message == "Not connected")
    }

    @Test func startNotifyAndAcquireNotifyExcludeEachOther() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let other = try await BlueZClient(address: rig.bluez.busAddress)
        defer { other.close() }
        let path = HeartRateSensor.measurementPath

        try await other.call(path, characteristicInterface, "StartNotify")
        let busy = await rig.client.error(path, characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(busy?.name == "org.bluez.Error.InProgress")
        try await other.call(path, characteristicInterface, "StopNotify")
        #expect(!sensor.measurement.isNotifying)

        let socket = try await ClientSocket.acquire(rig.client, path, "AcquireNotify")
        defer { socket.close() }
        for client in [rig.client, other] {
            let refused = await client.error(path, characteristicInterface, "StartNotify")
            #expect(refused?.name == "org.bluez.Error.NotPermitted")
            #expect(refused?.message == "Notify acquired")
        }
        // StopNotify from anyone ends the acquired session: its socket closes.
        let mark = rig.client.signals.count
        try await other.call(path, characteristicInterface, "StopNotify")
        #expect(await socket.receive() == .endOfFile)
        #expect(!sensor.measurement.isNotifying)
        _ = await rig.client.signals.expect(from: mark, "NotifyAcquired false") {
            $0.changes(path, characteristicInterface, "NotifyAcquired", to: .bool(false))
        }
        try await rig.client.call(path, characteristicInterface, "StartNotify")
        #expect(try await rig.client.property(path, characteristicInterface, "Notifying") == .bool(true))
    }

    @Test func closingTheSocketReleasesTheNotifications() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let path = HeartRateSensor.measurementPath
        let first = try await ClientSocket.acquire(rig.client, path, "AcquireNotify")
        let mark = rig.client.signals.count
        first.close()
        _ = await rig.client.signals.expect(from: mark, "NotifyAcquired false") {
            $0.changes(path, characteristicInterface, "NotifyAcquired", to: .bool(false))
        }
        #expect(!sensor.measurement.isNotifying)
        #expect(!sensor.measurement.notify([1]))
        let cccd = try await rig.client.call(
            HeartRateSensor.measurementCCCD, descriptorInterface, "ReadValue", [Self.noOptions])
        #expect(cccd.first == .bytes([0, 0]))

        let second = try await ClientSocket.acquire(rig.client, path, "AcquireNotify")
        defer { second.close() }
        #expect(sensor.measurement.notify([2]))
        #expect(await second.receive() == .datagram([2]))
    }

    @Test func theOwnerLeavingTheBusUnsubscribesButKeepsTheSocket() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let path = HeartRateSensor.measurementPath
        let owner = try await BlueZClient(address: rig.bluez.busAddress)
        let socket = try await ClientSocket.acquire(owner, path, "AcquireNotify")
        defer { socket.close() }
        owner.close()
        // 5.66's disconnect watch frees the notify session (the CCCD off) but not the socket.
        try await waitUntil("the CCCD is off") { !sensor.measurement.isNotifying }
        #expect(try await rig.client.property(path, characteristicInterface, "NotifyAcquired") == .bool(true))
        let refused = await rig.client.error(path, characteristicInterface, "StartNotify")
        #expect(refused?.message == "Notify acquired")
        let mark = rig.client.signals.count
        socket.close()
        _ = await rig.client.signals.expect(from: mark, "NotifyAcquired false") {
            $0.changes(path, characteristicInterface, "NotifyAcquired", to: .bool(false))
        }
    }

    @Test func aNotificationThatWouldBlockIsDropped() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let socket = try await ClientSocket.acquire(rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        defer { socket.close() }
        let count = 3000
        for index in 0..<count {
            // Each reaches bluetoothd (the CCCD is on), which drops it once the socket is full.
            #expect(
                sensor.measurement.notify([UInt8(index & 0xff), UInt8(index >> 8)] + [UInt8](repeating: 0, count: 98)))
        }
        var received: [[UInt8]] = []
        while case .datagram(let bytes) = await socket.receive(timeout: .milliseconds(100)) { received.append(bytes) }
        #expect(received.count > 0)
        #expect(received.count < count)
        let expected = (0..<received.count).map {
            [UInt8($0 & 0xff), UInt8($0 >> 8)] + [UInt8](repeating: 0, count: 98)
        }
        #expect(received == expected, "the ones that fit, in order")
        #expect(sensor.measurement.notify([7]))
        #expect(await socket.receive() == .datagram([7]))
    }

    // MARK: Link, device and bluetoothd going away

    @Test func aLinkDropClosesBothSockets() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let notifierPath = try probe.path(probe.notifier)
        let commandPath = try probe.path(probe.command)
        let notify = try await ClientSocket.acquire(rig.client, notifierPath, "AcquireNotify")
        defer { notify.close() }
        let write = try await ClientSocket.acquire(rig.client, commandPath, "AcquireWrite")
        defer { write.close() }
        let mark = rig.client.signals.count
        probe.peripheral.dropConnection()
        #expect(await notify.receive() == .endOfFile)
        #expect(await write.receive() == .endOfFile)
        // The GATT cache keeps the objects: each acquisition ends, after Connected turned false.
        let notifyReleased = await rig.client.signals.expect(from: mark, "NotifyAcquired false") {
            $0.changes(notifierPath, characteristicInterface, "NotifyAcquired", to: .bool(false))
        }
        let writeReleased = await rig.client.signals.expect(from: mark, "WriteAcquired false") {
            $0.changes(commandPath, characteristicInterface, "WriteAcquired", to: .bool(false))
        }
        let disconnected = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(probe.devicePath, deviceInterface, "Connected", to: .bool(false))
        }
        #expect(try #require(disconnected).serial < (try #require(notifyReleased)).serial)
        #expect(try #require(disconnected).serial < (try #require(writeReleased)).serial)
        // An acquired session is not registered again on the next connection (unlike StartNotify's).
        try await reconnect(rig, probe.devicePath)
        #expect(!probe.notifier.isNotifying)
        let again = try await ClientSocket.acquire(rig.client, notifierPath, "AcquireNotify")
        defer { again.close() }
        #expect(probe.notifier.notify([3]))
        #expect(await again.receive() == .datagram([3]))
    }

    @Test func withoutAGATTCacheTheSocketsCloseWithTheObjects() async throws {
        let rig = try await Rig.start(options: .init(gattCache: .no))
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let notify = try await ClientSocket.acquire(rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        defer { notify.close() }
        let write = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
        defer { write.close() }
        let mark = rig.client.signals.count
        sensor.peripheral.dropConnection()
        #expect(await notify.receive() == .endOfFile)
        #expect(await write.receive() == .endOfFile)
        _ = await rig.client.signals.expect(from: mark, "characteristic removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == HeartRateSensor.measurementPath
        }
        #expect(
            !rig.client.signals.since(mark).contains {
                $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "NotifyAcquired")
            })
    }

    @Test func removingTheDeviceClosesTheSockets() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let notify = try await ClientSocket.acquire(rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        defer { notify.close() }
        let write = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
        defer { write.close() }
        #expect(rig.bluez.removeDevice(sensor.peripheral))
        #expect(await notify.receive() == .endOfFile)
        #expect(await write.receive() == .endOfFile)
    }

    @Test func aRestartClosesTheSockets() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let notify = try await ClientSocket.acquire(rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        defer { notify.close() }
        let write = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
        defer { write.close() }
        try await rig.bluez.restart()
        #expect(await notify.receive() == .endOfFile)
        #expect(await write.receive() == .endOfFile)
    }

    // MARK: Write

    @Test func acquiredWritesReachThePeripheralAsCommands() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let path = try probe.path(probe.command)
        let mark = rig.client.signals.count
        let (socket, serial) = try await ClientSocket.acquireWithSerial(rig.client, path, "AcquireWrite")
        defer { socket.close() }
        #expect(socket.mtu == 517)
        let acquired = await rig.client.signals.expect(from: mark, "WriteAcquired true") {
            $0.changes(path, characteristicInterface, "WriteAcquired", to: .bool(true))
        }
        #expect(try #require(acquired).serial < serial)

        let values = (0..<50).map { [UInt8($0), 0xa5] as [UInt8] }
        for value in values { #expect(socket.send(value)) }
        // A datagram longer than 512 bytes loses the rest (sock_read's buffer); 512 fits an MTU of 517.
        #expect(socket.send([UInt8](repeating: 0x11, count: 600)))
        try await waitUntil("every write arrived") { probe.commandWrites.count == values.count + 1 }
        let writes = probe.commandWrites
        #expect(writes.dropLast().map(\.value) == values)
        #expect(writes.last?.value == [UInt8](repeating: 0x11, count: 512))
        #expect(writes.allSatisfy { $0.kind == .command && $0.offset == 0 })

        let refused = await rig.client.error(
            path, characteristicInterface, "WriteValue", [.bytes([1]), Self.noOptions])
        #expect(refused?.name == "org.bluez.Error.NotPermitted")
        #expect(refused?.message == "Write acquired")

        let closing = rig.client.signals.count
        socket.close()
        _ = await rig.client.signals.expect(from: closing, "WriteAcquired false") {
            $0.changes(path, characteristicInterface, "WriteAcquired", to: .bool(false))
        }
        try await rig.client.call(path, characteristicInterface, "WriteValue", [.bytes([9]), Self.noOptions])
        #expect(probe.commandWrites.last?.value == [9])
    }

    @Test func aDatagramLongerThanTheMTUAllowsIsDropped() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe(maximumMTU: 23)
        try await connect(rig, probe.peripheral)
        let socket = try await ClientSocket.acquire(rig.client, try probe.path(probe.command), "AcquireWrite")
        defer { socket.close() }
        #expect(socket.mtu == 23)
        #expect(socket.send([UInt8](repeating: 1, count: 20)))
        #expect(socket.send([UInt8](repeating: 2, count: 21)))
        #expect(socket.send([3]))
        try await waitUntil("the last write arrived") { probe.commandWrites.last?.value == [3] }
        #expect(probe.commandWrites.map(\.value) == [[UInt8](repeating: 1, count: 20), [3]])
    }

    @Test func acquireWriteErrorsFollowBlueZ() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let unsupported = await rig.client.error(
            HeartRateSensor.dataPath, characteristicInterface, "AcquireWrite", [Self.noOptions])
        #expect(unsupported?.name == "org.bluez.Error.NotSupported")
        let socket = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
        defer { socket.close() }
        let again = await rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "AcquireWrite", [Self.noOptions])
        #expect(again?.name == "org.bluez.Error.NotPermitted")
        #expect(again?.message == "Write acquired")
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Disconnect")
        #expect(await socket.receive() == .endOfFile)
        let disconnected = await rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "AcquireWrite", [Self.noOptions])
        #expect(disconnected?.name == "org.bluez.Error.Failed")
        #expect(disconnected?.message == "Not connected")
    }

    @Test func anEmptyDatagramStopsTheWritesUntilTheSocketCloses() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let path = try probe.path(probe.command)
        let socket = try await ClientSocket.acquire(rig.client, path, "AcquireWrite")
        defer { socket.close() }
        #expect(socket.send([1]))
        try await waitUntil("the first write arrived") { probe.commandWrites.count == 1 }
        // sock_read reads 0 bytes and returns false: 5.66 stops reading the socket for good.
        #expect(socket.send([]))
        #expect(socket.send([2]))
        try await Task.sleep(for: .milliseconds(100))
        #expect(probe.commandWrites.map(\.value) == [[1]])
        #expect(try await rig.client.property(path, characteristicInterface, "WriteAcquired") == .bool(true))
        let mark = rig.client.signals.count
        socket.close()
        _ = await rig.client.signals.expect(from: mark, "WriteAcquired false") {
            $0.changes(path, characteristicInterface, "WriteAcquired", to: .bool(false))
        }
    }

    @Test func theNotifySocketIsReadToo() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let probe = Probe()
        try await connect(rig, probe.peripheral)
        let socket = try await ClientSocket.acquire(rig.client, try probe.path(probe.dual), "AcquireNotify")
        defer { socket.close() }
        // create_sock sets sock_read on both directions: a datagram on the notify socket is a write command.
        #expect(socket.send([4, 2]))
        try await waitUntil("the write arrived") { probe.dualWrites.map(\.value) == [[4, 2]] }
        #expect(probe.dualWrites.first?.kind == .command)
        #expect(probe.dual.notify([5]))
        #expect(await socket.receive() == .datagram([5]))
    }

    // MARK: Waiting for the GATT client

    static let slowDiscovery = SimulatedBlueZ.Options(
        timing: .init(
            connection: .zero, serviceDiscovery: .milliseconds(300), connectTimeout: .seconds(5), disconnect: .zero,
            pairing: .zero))

    @Test func anAcquisitionBeforeServicesAreResolvedIsAnsweredOnceTheyAre() async throws {
        let rig = try await Rig.start(options: Self.slowDiscovery)
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Disconnect")
        let mark = rig.client.signals.count
        // The cached objects are there as soon as the link is up, the GATT client ready only later.
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Connect")
        #expect(
            try await rig.client.property(HeartRateSensor.path, deviceInterface, "ServicesResolved") == .bool(false))
        let (socket, serial) = try await ClientSocket.acquireWithSerial(
            rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        defer { socket.close() }
        let resolved = await rig.client.signals.expect(from: mark, "ServicesResolved") {
            $0.changes(HeartRateSensor.path, deviceInterface, "ServicesResolved", to: .bool(true))
        }
        #expect(try #require(resolved).serial < serial)
        #expect(sensor.measurement.notify([8]))
        #expect(await socket.receive() == .datagram([8]))
    }

    @Test func anAcquisitionWaitingWhenTheLinkDropsIsNeverAnswered() async throws {
        let rig = try await Rig.start(options: Self.slowDiscovery)
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Disconnect")
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Connect")
        async let waiting = rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "AcquireWrite", [Self.noOptions],
            timeout: .seconds(1))
        try await Task.sleep(for: .milliseconds(50))
        sensor.peripheral.dropConnection()
        #expect(await waiting?.code == .timeout)
        // 5.66's ready callback died with the link's GATT client: the characteristic stays acquired.
        try await reconnect(rig, HeartRateSensor.path)
        #expect(
            try await rig.client.property(HeartRateSensor.commandPath, characteristicInterface, "WriteAcquired")
                == .bool(true))
        let stuck = await rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "AcquireWrite", [Self.noOptions])
        #expect(stuck?.message == "Write acquired")
    }

    // MARK: Faults and descriptors

    @Test func faultsApplyToTheAcquireMethods() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let acquireNotify = SimulatedMethod(interface: characteristicInterface, member: "AcquireNotify")
        let acquireWrite = SimulatedMethod(interface: characteristicInterface, member: "AcquireWrite")
        rig.bluez.inject(.error(name: "org.bluez.Error.Failed", message: "Not connected"), for: acquireNotify)
        rig.bluez.inject(.error(name: "org.bluez.Error.Failed", message: "Failed"), for: acquireWrite)
        let notifyError = await rig.client.error(
            HeartRateSensor.measurementPath, characteristicInterface, "AcquireNotify", [Self.noOptions])
        #expect(notifyError?.message == "Not connected")
        let writeError = await rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "AcquireWrite", [Self.noOptions])
        #expect(writeError?.message == "Failed")
        rig.bluez.inject(.delay(.milliseconds(200)), for: acquireWrite)
        let clock = ContinuousClock()
        let start = clock.now
        let socket = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
        defer { socket.close() }
        #expect(clock.now - start >= .milliseconds(200))
        let notify = try await ClientSocket.acquire(rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
        notify.close()
    }

    @Test func acquireAndReleaseLeaveNoDescriptorBehind() async throws {
        let baseline = ClientSocket.openSequencedPacketSockets()
        do {
            let rig = try await Rig.start()
            defer { rig.stop() }
            let sensor = try await connectSensor(rig)
            for round in 0..<20 {
                let notify = try await ClientSocket.acquire(
                    rig.client, HeartRateSensor.measurementPath, "AcquireNotify")
                let write = try await ClientSocket.acquire(rig.client, HeartRateSensor.commandPath, "AcquireWrite")
                // Both pairs work (a value each way). Not counted against `baseline`: tests run
                // in parallel, and another one closing its sockets meanwhile lowers the count.
                #expect(sensor.measurement.notify([UInt8(round)]))
                #expect(await notify.receive() == .datagram([UInt8(round)]))
                #expect(write.send([UInt8(round)]))
                switch round % 3 {
                case 0:
                    // The client closes its ends.
                    let mark = rig.client.signals.count
                    notify.close()
                    write.close()
                    _ = await rig.client.signals.expect(from: mark, "WriteAcquired false") {
                        $0.changes(
                            HeartRateSensor.commandPath, characteristicInterface, "WriteAcquired", to: .bool(false))
                    }
                    _ = await rig.client.signals.expect(from: mark, "NotifyAcquired false") {
                        $0.changes(
                            HeartRateSensor.measurementPath, characteristicInterface, "NotifyAcquired",
                            to: .bool(false))
                    }
                case 1:
                    // StopNotify, and the link dropping.
                    try await rig.client.call(HeartRateSensor.measurementPath, characteristicInterface, "StopNotify")
                    #expect(await notify.receive() == .endOfFile)
                    sensor.peripheral.dropConnection()
                    #expect(await write.receive() == .endOfFile)
                    notify.close()
                    write.close()
                    try await waitUntil("released") {
                        try await rig.client.property(
                            HeartRateSensor.commandPath, characteristicInterface, "WriteAcquired") == .bool(false)
                    }
                    try await reconnect(rig, HeartRateSensor.path)
                default:
                    // bluetoothd restarting.
                    try await rig.bluez.restart()
                    #expect(await notify.receive() == .endOfFile)
                    #expect(await write.receive() == .endOfFile)
                    notify.close()
                    write.close()
                    try await reconnect(rig, HeartRateSensor.path, discover: true)
                }
            }
        }
        try await waitUntil("every socket is closed", timeout: .seconds(10)) {
            ClientSocket.openSequencedPacketSockets() <= baseline
        }
    }
}

// MARK: Helpers

/// A peripheral with one characteristic of each kind the acquire tests need.
struct Probe {
    let peripheral: SimulatedPeripheral
    let notifier = SimulatedCharacteristic(uuid: "0000BB01-0000-1000-8000-00805F9B34FB", flags: ["notify"])
    let indicator = SimulatedCharacteristic(uuid: "0000BB02-0000-1000-8000-00805F9B34FB", flags: ["indicate"])
    let command: SimulatedCharacteristic
    let dual: SimulatedCharacteristic
    let data = SimulatedCharacteristic(uuid: "0000BB05-0000-1000-8000-00805F9B34FB", flags: ["read", "write"])
    private let commandLog = WriteLog()
    private let dualLog = WriteLog()
    let devicePath = "/org/bluez/hci0/dev_C0_FF_EE_00_00_0A"

    /// The writes a characteristic's handler saw, in order.
    final class WriteLog: Sendable {
        private let requests = PosixMutex<[SimulatedWriteRequest]>([])
        var all: [SimulatedWriteRequest] { requests.withLock { $0 } }
        func record(_ request: SimulatedWriteRequest) { requests.withLock { $0.append(request) } }
    }

    init(maximumMTU: UInt16 = 517) {
        let commandLog = commandLog
        let dualLog = dualLog
        command = SimulatedCharacteristic(
            uuid: "0000BB03-0000-1000-8000-00805F9B34FB", flags: ["write-without-response"],
            onWrite: { request throws(SimulatedATTError) in commandLog.record(request) })
        dual = SimulatedCharacteristic(
            uuid: "0000BB04-0000-1000-8000-00805F9B34FB", flags: ["notify", "indicate", "write-without-response"],
            onWrite: { request throws(SimulatedATTError) in dualLog.record(request) })
        peripheral = SimulatedPeripheral(
            address: "C0:FF:EE:00:00:0A", name: "Probe", serviceUUIDs: ["BB00"],
            services: [
                SimulatedService(
                    uuid: "0000BB00-0000-1000-8000-00805F9B34FB",
                    characteristics: [notifier, indicator, command, dual, data])
            ],
            maximumMTU: maximumMTU)
    }

    var commandWrites: [SimulatedWriteRequest] { commandLog.all }
    var dualWrites: [SimulatedWriteRequest] { dualLog.all }

    func path(_ characteristic: SimulatedCharacteristic) throws -> String {
        try #require(characteristic.objectPath)
    }
}

/// Adds `peripheral`, discovers it, connects and waits for `ServicesResolved`.
func connect(_ rig: Rig, _ peripheral: SimulatedPeripheral) async throws {
    try rig.bluez.addPeripheral(peripheral)
    let path = try #require(peripheral.devicePath)
    try await startDiscovery(rig.client)
    _ = await rig.client.signals.expect("device found") { $0.member == "InterfacesAdded" && $0.objectPath == path }
    try await reconnect(rig, path)
}

/// Connects a known device and waits for `ServicesResolved`; after a restart, `discover` finds it first.
func reconnect(_ rig: Rig, _ path: String, discover: Bool = false) async throws {
    if discover {
        let mark = rig.client.signals.count
        try await startDiscovery(rig.client)
        _ = await rig.client.signals.expect(from: mark, "device found") {
            $0.member == "InterfacesAdded" && $0.objectPath == path
        }
    }
    let mark = rig.client.signals.count
    try await rig.client.call(path, deviceInterface, "Connect")
    _ = await rig.client.signals.expect(from: mark, "ServicesResolved") {
        $0.changes(path, deviceInterface, "ServicesResolved", to: .bool(true))
    }
}

/// The caller's end of an acquired socket.
final class ClientSocket: Sendable {
    enum Received: Equatable, Sendable {
        case datagram([UInt8])
        /// bluetoothd closed its end.
        case endOfFile
        /// Nothing came in time.
        case nothing
    }

    private let descriptor: PosixMutex<Int32>
    let mtu: UInt16

    /// Takes the descriptor out of an `AcquireNotify` or `AcquireWrite` reply.
    init(_ reply: DBusMessage) throws {
        let arguments = try reply.arguments()
        #expect(reply.signature == "hq")
        let fd = try #require(arguments.first?.unixFDValue).take()
        descriptor = PosixMutex(fd)
        guard arguments.count == 2, case .uint16(let mtu) = arguments[1] else {
            Glibc.close(fd)
            throw DBusError(.invalidArgs, "AcquireNotify/AcquireWrite replies (h fd, q mtu)")
        }
        self.mtu = mtu
    }

    static func acquire(_ client: BlueZClient, _ path: String, _ member: String) async throws -> ClientSocket {
        try await acquireWithSerial(client, path, member).socket
    }

    /// Also the reply's serial, to order it among the signals. The reply message itself is not
    /// kept: it holds a descriptor of its own for our end until freed.
    static func acquireWithSerial(_ client: BlueZClient, _ path: String, _ member: String) async throws -> (
        socket: ClientSocket, serial: UInt32
    ) {
        let reply = try await client.reply(path, characteristicInterface, member, [filter([:])])
        return (try ClientSocket(reply), reply.serial)
    }

    private var fd: Int32 { descriptor.withLock { $0 } }

    /// The next datagram, end of file, or nothing within `timeout` (polls without blocking a thread).
    /// The default, a wait for a datagram that should come, is scaled by `TestTime.scale`; the short
    /// ones that check nothing comes are not.
    func receive(timeout: Duration = TestTime.scaled(.seconds(5))) async -> Received {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            let fd = self.fd
            guard fd >= 0 else { return .endOfFile }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&entry, 1, 0) > 0 {
                var buffer = [UInt8](repeating: 0, count: 2048)
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 { return .datagram(Array(buffer[..<count])) }
                if count == 0 { return entry.revents & Int16(POLLHUP) != 0 ? .endOfFile : .datagram([]) }
                if errno != EAGAIN && errno != EINTR { return .endOfFile }
            }
            if clock.now >= deadline { return .nothing }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Sends one datagram; false when it could not be sent.
    func send(_ bytes: [UInt8]) -> Bool {
        let fd = self.fd
        let sent = bytes.withUnsafeBytes {
            Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        return sent == bytes.count
    }

    /// Closes our end (idempotent).
    func close() {
        let fd = descriptor.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { Glibc.close(fd) }
    }

    deinit { close() }

    /// How many of this process's descriptors (`/proc/self/fd`) are `SOCK_SEQPACKET` sockets.
    static func openSequencedPacketSockets() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let fd = Int32(name), fd != own else { continue }
            var type: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_SEQPACKET.rawValue) {
                count += 1
            }
        }
        return count
    }
}
