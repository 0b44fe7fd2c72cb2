import BlueZKitTesting
import DBus
import Locking
import Testing

@Suite(.timeLimit(.minutes(5))) struct GATTTests {
    static func offset(_ value: UInt16) -> DBusValue { filter(["offset": .uint16(value)]) }
    static let noOptions = filter([:])

    @Test func readValueReturnsTheValueFromTheOffsetAndCachesIt() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        let whole = try await rig.client.reply(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(try whole.arguments().first == .bytes(Array("hello".utf8)))
        // bluetoothd announces the cached value before it replies.
        let cached = await rig.client.signals.expect(from: mark, "Value") {
            $0.changes(HeartRateSensor.dataPath, characteristicInterface, "Value", to: .bytes(Array("hello".utf8)))
        }
        #expect(try #require(cached).serial < whole.serial)
        sensor.data.value = Array("HELLO!".utf8)
        let tail = try await rig.client.call(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [Self.offset(3)])
        #expect(tail.first == .bytes(Array("LO!".utf8)))
        let end = try await rig.client.call(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [Self.offset(6)])
        #expect(end.first == .bytes([]))
        // A read from an offset overwrites the cache from there (gatt_db_attribute_write).
        #expect(
            try await rig.client.property(HeartRateSensor.dataPath, characteristicInterface, "Value")
                == .bytes(Array("helLO!".utf8)))
    }

    @Test func readErrorsFollowBlueZ() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let pastTheEnd = await rig.client.error(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [Self.offset(6)])
        #expect(pastTheEnd?.name == "org.bluez.Error.InvalidArguments")
        #expect(pastTheEnd?.message == "Invalid offset")
        let notReadable = await rig.client.error(
            HeartRateSensor.controlPointPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(notReadable?.name == "org.bluez.Error.NotPermitted")
        #expect(notReadable?.message == "Read not permitted")
        let application = await rig.client.error(
            HeartRateSensor.failingPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(application?.name == "org.bluez.Error.Failed")
        #expect(application?.message == "Operation failed with ATT error: 0x80")
        let badOption = await rig.client.error(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [filter(["offset": .uint32(1)])])
        #expect(badOption?.name == "org.bluez.Error.InvalidArguments")
    }

    @Test func writeValueReachesThePeripheral() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        try await rig.client.call(
            HeartRateSensor.dataPath, characteristicInterface, "WriteValue", [.bytes([1, 2, 3]), Self.noOptions])
        #expect(sensor.data.value == [1, 2, 3])
        try await rig.client.call(
            HeartRateSensor.dataPath, characteristicInterface, "WriteValue",
            [.bytes([9]), filter(["offset": .uint16(1), "type": .string("request")])])
        #expect(sensor.data.value == [1, 9])
        try await rig.client.call(
            HeartRateSensor.commandPath, characteristicInterface, "WriteValue", [.bytes([7]), Self.noOptions])
        #expect(sensor.command.value == [7])
        // The cached Value changes only with reads and notifications.
        #expect(try await rig.client.property(HeartRateSensor.dataPath, characteristicInterface, "Value") == .bytes([]))
    }

    @Test func writeErrorsFollowBlueZ() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let notWritable = await rig.client.error(
            HeartRateSensor.locationPath, characteristicInterface, "WriteValue",
            [.bytes([1]), filter(["type": .string("request")])])
        #expect(notWritable?.name == "org.bluez.Error.NotPermitted")
        #expect(notWritable?.message == "Write not permitted")
        let unsupported = await rig.client.error(
            HeartRateSensor.locationPath, characteristicInterface, "WriteValue", [.bytes([1]), Self.noOptions])
        #expect(unsupported?.name == "org.bluez.Error.NotSupported")
        let rejected = await rig.client.error(
            HeartRateSensor.failingPath, characteristicInterface, "WriteValue", [.bytes([1]), Self.noOptions])
        #expect(rejected?.name == "org.bluez.Error.InvalidArguments")
        #expect(rejected?.message == "Invalid Length")
        let tooLong = await rig.client.error(
            HeartRateSensor.commandPath, characteristicInterface, "WriteValue",
            [.bytes(Array(repeating: 0, count: 515)), Self.noOptions])
        #expect(tooLong?.message == "Failed to initiate write")
        // A command gets no response: the peripheral's rejection never reaches the central.
        let command = await rig.client.error(
            HeartRateSensor.locationPath, characteristicInterface, "WriteValue",
            [.bytes([1]), filter(["type": .string("command")])])
        #expect(command == nil)
    }

    @Test func notificationsArriveAsValueChanges() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        #expect(!sensor.measurement.notify([0]), "not subscribed yet")
        var mark = rig.client.signals.count
        let started = try await rig.client.reply(
            HeartRateSensor.measurementPath, characteristicInterface, "StartNotify")
        let notifying = await rig.client.signals.expect(from: mark, "Notifying") {
            $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "Notifying", to: .bool(true))
        }
        #expect(try #require(notifying).serial < started.serial)
        #expect(sensor.measurement.isNotifying)
        mark = rig.client.signals.count
        #expect(sensor.measurement.notify([0x06, 72]))
        #expect(sensor.peripheral.updateValue([0x06, 72], for: sensor.measurement))
        // A reply comes after every signal sent before it: the round trip collects both notifications.
        _ = try await rig.client.property(HeartRateSensor.measurementPath, characteristicInterface, "Notifying")
        let values = rig.client.signals.since(mark).filter {
            $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "Value")
        }
        #expect(values.map { $0.changed["Value"] } == [.bytes([0x06, 72]), .bytes([0x06, 72])])
        let cccd = try await rig.client.call(
            HeartRateSensor.measurementCCCD, descriptorInterface, "ReadValue", [Self.noOptions])
        #expect(cccd.first == .bytes([1, 0]))
        mark = rig.client.signals.count
        try await rig.client.call(HeartRateSensor.measurementPath, characteristicInterface, "StopNotify")
        #expect(
            rig.client.signals.since(mark).contains {
                $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "Notifying", to: .bool(false))
            })
        #expect(!sensor.measurement.notify([1]))
        let again = await rig.client.error(HeartRateSensor.measurementPath, characteristicInterface, "StopNotify")
        #expect(again?.message == "No notify session started")
        let unsupported = await rig.client.error(HeartRateSensor.dataPath, characteristicInterface, "StartNotify")
        #expect(unsupported?.name == "org.bluez.Error.NotSupported")
    }

    @Test func notifySessionsArePerClient() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let other = try await BlueZClient(address: rig.bluez.busAddress)
        try await rig.client.call(HeartRateSensor.measurementPath, characteristicInterface, "StartNotify")
        try await other.call(HeartRateSensor.measurementPath, characteristicInterface, "StartNotify")
        try await rig.client.call(HeartRateSensor.measurementPath, characteristicInterface, "StopNotify")
        #expect(
            try await rig.client.property(HeartRateSensor.measurementPath, characteristicInterface, "Notifying")
                == .bool(true))
        #expect(sensor.measurement.isNotifying)
        let mark = rig.client.signals.count
        other.close()
        _ = await rig.client.signals.expect(from: mark, "Notifying false") {
            $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "Notifying", to: .bool(false))
        }
        #expect(!sensor.measurement.isNotifying)
    }

    @Test func descriptorsReadAndWrite() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let read = try await rig.client.call(
            HeartRateSensor.userDescriptionPath, descriptorInterface, "ReadValue", [Self.noOptions])
        #expect(read.first == .bytes(Array("data".utf8)))
        #expect(
            try await rig.client.property(HeartRateSensor.userDescriptionPath, descriptorInterface, "Value")
                == .bytes(Array("data".utf8)))
        try await rig.client.call(
            HeartRateSensor.userDescriptionPath, descriptorInterface, "WriteValue",
            [.bytes(Array("new".utf8)), Self.noOptions])
        #expect(sensor.userDescription.value == Array("new".utf8))
        let cccd = await rig.client.error(
            HeartRateSensor.measurementCCCD, descriptorInterface, "WriteValue", [.bytes([1, 0]), Self.noOptions])
        #expect(cccd?.name == "org.bluez.Error.NotPermitted")
        #expect(cccd?.message == "Write not permitted")
        #expect(sensor.userDescription.objectPath == HeartRateSensor.userDescriptionPath)
        #expect(sensor.measurement.objectPath == HeartRateSensor.measurementPath)
    }

    @Test func gattCallsNeedAConnection() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Disconnect")
        let error = await rig.client.error(
            HeartRateSensor.dataPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(error?.name == "org.bluez.Error.Failed")
        #expect(error?.message == "Not connected")
        // StartNotify while disconnected is kept and registered on the next connection.
        try await rig.client.call(HeartRateSensor.measurementPath, characteristicInterface, "StartNotify")
        let mark = rig.client.signals.count
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Connect")
        _ = await rig.client.signals.expect(from: mark, "Notifying after reconnection") {
            $0.changes(HeartRateSensor.measurementPath, characteristicInterface, "Notifying", to: .bool(true))
        }
    }

    @Test func anEncryptedReadFailsAndDropsTheLinkWithoutAnAgent() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        await #expect(throws: (any Error).self) {
            try await rig.client.call(
                HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        }
        #expect(try await rig.client.property(HeartRateSensor.path, deviceInterface, "Connected") == .bool(false))
        #expect(try await rig.client.property(HeartRateSensor.path, deviceInterface, "Paired") == .bool(false))
    }

    /// An agent on the test's connection that answers `RequestAuthorization` and records it.
    final class TestAgent: Sendable {
        let authorizations = PosixMutex<[String]>([])

        init(on connection: DBusConnection, accepts: Bool) async throws {
            try await connection.export(
                [
                    DBusInterface(
                        "org.bluez.Agent1",
                        methods: [
                            DBusMethod("RequestAuthorization", in: "o") { [self] invocation in
                                let device = (try? invocation.arguments())?.first?.objectPathValue?.rawValue ?? "?"
                                self.authorizations.withLock { $0.append(device) }
                                if accepts {
                                    invocation.reply()
                                } else {
                                    invocation.reply(error: DBusError(name: "org.bluez.Error.Rejected", message: "no"))
                                }
                            }
                        ])
                ], at: try ObjectPath("/test/agent"))
        }
    }

    private func registerAgent(_ rig: Rig, asDefault: Bool) async throws {
        try await rig.client.call(
            "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
            [.objectPath(try ObjectPath("/test/agent")), .string("NoInputNoOutput")])
        if asDefault {
            try await rig.client.call(
                "/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent",
                [.objectPath(try ObjectPath("/test/agent"))])
        }
    }

    @Test func anEncryptedReadPairsFirstAfterTheDefaultAgentAuthorizes() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let agent = try await TestAgent(on: rig.client.connection, accepts: true)
        try await registerAgent(rig, asDefault: true)
        let mark = rig.client.signals.count
        let value = try await rig.client.call(
            HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(value.first == .bytes([0x5e]))
        #expect(agent.authorizations.withLock { $0 } == [HeartRateSensor.path])
        #expect(
            rig.client.signals.since(mark).contains {
                $0.changes(HeartRateSensor.path, deviceInterface, "Paired", to: .bool(true))
            })
        // Paired now: the next read does not ask again.
        _ = try await rig.client.call(
            HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(agent.authorizations.withLock { $0.count } == 1)
    }

    @Test func anEncryptedReadFailsWhenTheAgentRejects() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let agent = try await TestAgent(on: rig.client.connection, accepts: false)
        try await registerAgent(rig, asDefault: true)
        await #expect(throws: (any Error).self) {
            try await rig.client.call(
                HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        }
        #expect(agent.authorizations.withLock { $0 } == [HeartRateSensor.path])
        #expect(try await rig.client.property(HeartRateSensor.path, deviceInterface, "Paired") == .bool(false))
        #expect(try await rig.client.property(HeartRateSensor.path, deviceInterface, "Connected") == .bool(false))
    }

    /// bluetoothd (5.51+, `agent_create`) makes the first agent registered the default: it is
    /// asked without having called `RequestDefaultAgent`.
    @Test func theFirstAgentRegisteredIsTheDefaultAndIsAsked() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        try await connectSensor(rig)
        let agent = try await TestAgent(on: rig.client.connection, accepts: true)
        try await registerAgent(rig, asDefault: false)
        _ = try await rig.client.call(
            HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        #expect(agent.authorizations.withLock { $0 } == [HeartRateSensor.path])
        #expect(rig.bluez.defaultAgentLog.count == 1)
    }

    /// An agent registered behind another one waits in the queue and is not asked.
    @Test func anAgentQueuedBehindAnotherIsNotAsked() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let first = try await BlueZClient(address: rig.bluez.busAddress)
        defer { first.close() }
        try await connectSensor(rig)
        let firstAgent = try await TestAgent(on: first.connection, accepts: false)
        try await first.call(
            "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
            [.objectPath(try ObjectPath("/test/agent")), .string("NoInputNoOutput")])
        let agent = try await TestAgent(on: rig.client.connection, accepts: true)
        try await registerAgent(rig, asDefault: false)
        await #expect(throws: (any Error).self) {
            try await rig.client.call(
                HeartRateSensor.secretPath, characteristicInterface, "ReadValue", [Self.noOptions])
        }
        #expect(firstAgent.authorizations.withLock { $0 } == [HeartRateSensor.path])
        #expect(agent.authorizations.withLock { $0 }.isEmpty)
        #expect(try await rig.client.property(HeartRateSensor.path, deviceInterface, "Paired") == .bool(false))
    }
}
