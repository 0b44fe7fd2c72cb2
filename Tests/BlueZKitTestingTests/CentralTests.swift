import BlueZKitTesting
import DBus
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct CentralTests {
    static let characteristic = "/app/service0/char0"
    static let devicePath = "/org/bluez/hci0/dev_11_22_33_44_55_66"

    /// A rig with the standard application registered and a central with MTU 185 on hci0.
    static func setUp(flags: [String] = ["read", "write", "notify", "write-without-response"]) async throws
        -> (Rig, TestGATTApplication, SimulatedCentral)
    {
        let rig = try await Rig.start()
        let app = try await TestGATTApplication.standard(address: rig.bluez.busAddress, flags: flags)
        try await app.register()
        let central = try rig.bluez.addCentral(address: "11:22:33:44:55:66", mtu: 185)
        return (rig, app, central)
    }

    @Test func readsAndWritesCarryBlueZsOptions() async throws {
        let (rig, app, central) = try await Self.setUp()
        defer {
            app.close()
            rig.stop()
        }
        #expect(central.devicePath == Self.devicePath)
        app.state.withLock { $0.values[Self.characteristic] = [1, 2, 3] }
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A37") == [1, 2, 3])
        let base: [String: DBusValue] = [
            "device": .objectPath(try ObjectPath(Self.devicePath)), "link": .string("LE"), "mtu": .uint16(185),
        ]
        #expect(app.calls.last == .init(member: "ReadValue", path: Self.characteristic, options: base))
        _ = try await central.read(serviceUUID: "180D", characteristicUUID: "2A37", offset: 2)
        #expect(app.calls.last?.options == base.merging(["offset": .uint16(2)]) { $1 })
        try await central.write(serviceUUID: "180D", characteristicUUID: uuid16("2A37"), value: [9, 8], offset: 1)
        #expect(
            app.calls.last
                == .init(
                    member: "WriteValue", path: Self.characteristic,
                    options: base.merging(["offset": .uint16(1)]) { $1 }, value: [9, 8]))
        try await central.write(serviceUUID: "180D", characteristicUUID: "2A37", value: [7], type: .command)
        #expect(app.calls.last == .init(member: "WriteValue", path: Self.characteristic, options: base, value: [7]))
        #expect(app.state.withLock { $0.values[Self.characteristic] } == [7])
    }

    @Test func applicationErrorsBecomeATTErrorsAsInBlueZ() async throws {
        let (rig, app, central) = try await Self.setUp()
        defer {
            app.close()
            rig.stop()
        }
        let cases: [(String, String, UInt8, UInt8)] = [
            ("org.bluez.Error.NotPermitted", "", 0x02, 0x03),
            ("org.bluez.Error.NotAuthorized", "", 0x08, 0x08),
            ("org.bluez.Error.InvalidOffset", "", 0x07, 0x07),
            ("org.bluez.Error.InvalidValueLength", "", 0x0D, 0x0D),
            ("org.bluez.Error.NotSupported", "", 0x06, 0x06),
            ("org.bluez.Error.Failed", "0x85", 0x85, 0x85),
            ("org.bluez.Error.Failed", "0x20", 0x0E, 0x0E),
            ("org.bluez.Error.Failed", "something broke", 0x80, 0x80),
            ("org.example.Error.Weird", "", 0x0E, 0x0E),
        ]
        for (name, message, readCode, writeCode) in cases {
            app.state.withLock {
                $0.readError = DBusError(name: name, message: message)
                $0.writeError = DBusError(name: name, message: message)
            }
            await #expect(throws: SimulatedATTError(code: readCode), "\(name) \(message)") {
                try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
            }
            await #expect(throws: SimulatedATTError(code: writeCode), "\(name) \(message)") {
                try await central.write(serviceUUID: "180D", characteristicUUID: "2A37", value: [1])
            }
            // A write command has no response: the application's error goes nowhere.
            try await central.write(serviceUUID: "180D", characteristicUUID: "2A37", value: [1], type: .command)
        }
        await #expect(throws: SimulatedATTError.invalidHandle) {
            try await central.read(serviceUUID: "180D", characteristicUUID: "2A38")
        }
    }

    @Test func flagsDecideWhatReachesTheApplication() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["write"])
        defer {
            app.close()
            rig.stop()
        }
        await #expect(throws: SimulatedATTError.readNotPermitted) {
            try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
        }
        await #expect(throws: SimulatedATTError.writeNotPermitted) {
            try await central.write(serviceUUID: "180D", characteristicUUID: "2A37", value: [1], type: .command)
        }
        await #expect(throws: SimulatedATTError(code: 0xFD)) {
            try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        }
        #expect(app.calls.isEmpty)
    }

    @Test func subscribersReceiveTheApplicationsValueChanges() async throws {
        let (rig, app, central) = try await Self.setUp()
        defer {
            app.close()
            rig.stop()
        }
        let other = try rig.bluez.addCentral(address: "11:22:33:44:55:77")
        let values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        let otherValues = try await other.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        // bluetoothd calls StartNotify for every enabling central.
        #expect(app.calls.map(\.member) == ["StartNotify", "StartNotify"])
        try app.notify(Self.characteristic, [0x06, 72])
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == [0x06, 72])
        var otherIterator = otherValues.makeAsyncIterator()
        #expect(await otherIterator.next() == [0x06, 72])
        // Enabling again is no change for bluetoothd: no StartNotify, and the old stream ends.
        let again = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        #expect(await iterator.next() == nil)
        #expect(app.calls.map(\.member) == ["StartNotify", "StartNotify"])
        iterator = again.makeAsyncIterator()
        // StopNotify only when the last central disables notifications.
        try await central.unsubscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        #expect(await iterator.next() == nil)
        #expect(app.calls.map(\.member) == ["StartNotify", "StartNotify"])
        try await other.unsubscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        #expect(app.calls.map(\.member) == ["StartNotify", "StartNotify", "StopNotify"])
    }

    @Test func notificationsEndWhenTheApplicationLeaves() async throws {
        let (rig, app, central) = try await Self.setUp()
        defer { rig.stop() }
        let values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try app.notify(Self.characteristic, [1])
        app.close()
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == [1])
        #expect(await iterator.next() == nil)
        try await waitUntil("the application is dropped") { rig.bluez.adapters[0].registeredApplications.isEmpty }
        await #expect(throws: SimulatedATTError.invalidHandle) {
            try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
        }
    }

    @Test func aConnectedCentralHasADevice() async throws {
        let (rig, app, central) = try await Self.setUp()
        defer {
            app.close()
            rig.stop()
        }
        let device = try #require(try await rig.client.managedObjects()[Self.devicePath]?[deviceInterface])
        #expect(device["Address"] == .string("11:22:33:44:55:66"))
        #expect(device["Connected"] == .bool(true))
        #expect(central.isConnected)
        var mark = rig.client.signals.count
        await central.disconnect()
        _ = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(Self.devicePath, deviceInterface, "Connected", to: .bool(false))
        }
        await #expect(throws: SimulatedATTError.unlikelyError) {
            try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
        }
        #expect(central.connect())
        #expect(try await rig.client.property(Self.devicePath, deviceInterface, "Connected") == .bool(true))
        _ = try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
        // Disconnect from bluetoothd's side.
        mark = rig.client.signals.count
        try await rig.client.call(Self.devicePath, deviceInterface, "Disconnect")
        _ = await rig.client.signals.expect(from: mark, "Connected false") {
            $0.changes(Self.devicePath, deviceInterface, "Connected", to: .bool(false))
        }
        #expect(!central.isConnected)
        #expect(central.connect())
        rig.bluez.adapters[0].setPowered(false)
        #expect(!central.isConnected)
        #expect(!central.connect())
    }

    @Test func addCentralValidatesItsArguments() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        #expect(throws: SimulatedBlueZError.self) { try rig.bluez.addCentral(address: "not an address") }
        let central = try rig.bluez.addCentral(address: "aa:bb:cc:dd:ee:ff")
        #expect(central.address == "AA:BB:CC:DD:EE:FF")
        #expect(central.adapter.name == "hci0")
        await #expect(throws: SimulatedATTError.invalidHandle) {
            try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
        }
    }

    @Test func theFirstSubscriberMakesBluetoothdAcquireTheApplicationsSocket() async throws {
        let rig = try await Rig.start()
        var objects = [
            TestGATTApplication.service("/app/service0", uuid: "180D"),
            TestGATTApplication.characteristic(
                "/app/service0/char0", uuid: "2A37", service: "/app/service0", flags: ["notify"]),
        ]
        objects[1].properties["NotifyAcquired"] = .bool(false)
        let app = try await TestGATTApplication(address: rig.bluez.busAddress, objects: objects)
        defer {
            app.close()
            rig.stop()
        }
        try await app.register()
        let first = try rig.bluez.addCentral(address: "11:22:33:44:55:66", mtu: 185)
        let second = try rig.bluez.addCentral(address: "11:22:33:44:55:77", mtu: 100)
        var firstValues = try await first.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        var secondValues = try await second.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        // One AcquireNotify with the first central's options, no StartNotify for anyone.
        #expect(app.calls.map(\.member) == ["AcquireNotify"])
        #expect(
            app.calls.first?.options == [
                "device": .objectPath(try ObjectPath(Self.devicePath)), "link": .string("LE"), "mtu": .uint16(185),
            ])
        #expect(app.notifyThroughSocket(Self.characteristic, [0x00, 0x48]))
        #expect(await firstValues.next() == [0x00, 0x48])
        #expect(await secondValues.next() == [0x00, 0x48])
        // The last central to leave closes the socket; nobody calls StopNotify.
        try await first.unsubscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        #expect(!app.notifySocketClosed(Self.characteristic))
        try await second.unsubscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try await waitUntil("socket closed") { app.notifySocketClosed(Self.characteristic) }
        #expect(app.calls.map(\.member) == ["AcquireNotify"])
    }
}
