import BlueZKitTesting
import DBus
import Locking
import TestSupport
import Testing

/// A central subscribed for indications confirms each value, and bluetoothd calls the
/// application's `Confirm()` for it (`conf_cb` in bluetoothd 5.66's `src/gatt-database.c`).
@Suite(.timeLimit(.minutes(5))) struct IndicationConfirmTests {
    /// One characteristic that records the calls bluetoothd makes on it, `Confirm` included.
    final class App: Sendable {
        static let path = "/ind/service0/char0"
        /// What the handlers record, shared with them.
        final class Log: Sendable {
            let calls = PosixMutex<[String]>([])
            /// The senders of the `Confirm` calls.
            let confirmers = PosixMutex<[String]>([])
        }

        let connection: DBusConnection
        let log = Log()

        init(address: String, flags: [String]) async throws {
            connection = try await DBusConnection.open(address: address, label: "test.indications")
            let root = try ObjectPath("/ind")
            let servicePath = try ObjectPath("/ind/service0")
            try await connection.addObjectManager(at: root)
            let service = DBusInterface(
                "org.bluez.GattService1",
                properties: [
                    DBusProperty("UUID", "s", get: { .string("180D") }),
                    DBusProperty("Primary", "b", get: { .bool(true) }),
                ])
            try await connection.export([service], at: servicePath)
            let log = self.log
            func record(_ member: MemberName) -> DBusMethod {
                DBusMethod(member) { invocation in
                    log.calls.withLock { $0.append(member.rawValue) }
                    invocation.reply()
                }
            }
            let characteristic = DBusInterface(
                "org.bluez.GattCharacteristic1",
                methods: [
                    DBusMethod("ReadValue", in: "a{sv}", out: "ay") { invocation in
                        log.calls.withLock { $0.append("ReadValue") }
                        invocation.reply([.bytes([0])])
                    },
                    record("StartNotify"), record("StopNotify"),
                    DBusMethod("Confirm") { invocation in
                        log.calls.withLock { $0.append("Confirm") }
                        log.confirmers.withLock { $0.append(invocation.sender?.rawValue ?? "") }
                        invocation.reply()
                    },
                ],
                properties: [
                    DBusProperty("UUID", "s", get: { .string("2A37") }),
                    DBusProperty("Service", "o", get: { .objectPath(servicePath) }),
                    DBusProperty("Flags", "as", get: { .stringArray(["read"] + flags) }),
                ])
            try await connection.export([characteristic], at: ObjectPath(Self.path))
            _ = try await connection.call(
                destination: "org.bluez", path: try ObjectPath("/org/bluez/hci0"), interface: "org.bluez.GattManager1",
                member: "RegisterApplication",
                arguments: [.objectPath(root), .stringVariantDictionary([:])])
        }

        /// `PropertiesChanged` of the characteristic's `Value`.
        func send(_ value: [UInt8]) throws {
            connection.emitPropertiesChanged(
                path: try ObjectPath(Self.path), interface: "org.bluez.GattCharacteristic1",
                changed: ["Value": .bytes(value)])
        }

        var calls: [String] { log.calls.withLock { $0 } }

        func count(_ member: String) -> Int { calls.filter { $0 == member }.count }
    }

    static func setUp(flags: [String]) async throws -> (Rig, App, SimulatedCentral) {
        let rig = try await Rig.start()
        let app = try await App(address: rig.bluez.busAddress, flags: flags)
        let central = try rig.bluez.addCentral(address: "11:22:33:44:55:66", mtu: 185)
        return (rig, app, central)
    }

    /// A read: its `ReadValue` reaches the application after every `Confirm` sent before it.
    static func sync(_ central: SimulatedCentral) async throws {
        _ = try await central.read(serviceUUID: "180D", characteristicUUID: "2A37")
    }

    @Test func eachIndicationIsConfirmedByBluetoothd() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["indicate"])
        defer {
            app.connection.close()
            rig.stop()
        }
        // Only indications are possible: the default subscription asks for them.
        var values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        try app.send([1])
        try app.send([2])
        #expect(await values.next() == [1])
        #expect(await values.next() == [2])
        try await waitUntil("two confirmations") { app.count("Confirm") == 2 }
        let bluetoothd = try #require(try await app.connection.nameOwner(of: "org.bluez"))
        #expect(app.log.confirmers.withLock { $0 } == [bluetoothd.rawValue, bluetoothd.rawValue])
        #expect(central.heldConfirmations == 0)
    }

    @Test func notificationsAreNotConfirmed() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["notify", "indicate"])
        defer {
            app.connection.close()
            rig.stop()
        }
        var values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        try app.send([1])
        #expect(await values.next() == [1])
        try await Self.sync(central)
        #expect(app.calls == ["StartNotify", "ReadValue"])
        // The same characteristic, asked for indications by another central.
        let other = try rig.bluez.addCentral(address: "11:22:33:44:55:77")
        var indications = try await other.subscribe(
            serviceUUID: "180D", characteristicUUID: "2A37", indications: true
        ).makeAsyncIterator()
        try app.send([2])
        #expect(await indications.next() == [2])
        try await Self.sync(other)
        #expect(app.calls == ["StartNotify", "ReadValue", "StartNotify", "Confirm", "ReadValue"])
    }

    @Test func heldConfirmationsAreSentWhenReleased() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["indicate"])
        defer {
            app.connection.close()
            rig.stop()
        }
        central.confirmsIndications = false
        var values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        try app.send([1])
        try app.send([2])
        #expect(await values.next() == [1])
        #expect(await values.next() == [2])
        #expect(central.heldConfirmations == 2)
        try await Self.sync(central)
        #expect(app.count("Confirm") == 0)
        central.confirmHeldIndications()
        #expect(central.heldConfirmations == 0)
        try await waitUntil("both confirmed") { app.count("Confirm") == 2 }
    }

    @Test func aDroppedLinkCompletesItsUnconfirmedIndications() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["indicate"])
        defer {
            app.connection.close()
            rig.stop()
        }
        central.confirmsIndications = false
        var values = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
            .makeAsyncIterator()
        try app.send([1])
        #expect(await values.next() == [1])
        await central.disconnect()
        // bluetoothd's conf_cb runs for the failed indication, before the CCC is cleared (StopNotify).
        try await waitUntil("StopNotify") { app.count("StopNotify") == 1 }
        #expect(app.calls == ["StartNotify", "Confirm", "StopNotify"])
        #expect(central.heldConfirmations == 0)
    }

    @Test func aSubscriptionTheCharacteristicCannotServeIsRefused() async throws {
        let (rig, app, central) = try await Self.setUp(flags: ["notify"])
        defer {
            app.connection.close()
            rig.stop()
        }
        await #expect(throws: SimulatedATTError(code: 0xFD)) {
            try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37", indications: true)
        }
        let (otherRig, otherApp, otherCentral) = try await Self.setUp(flags: ["indicate"])
        defer {
            otherApp.connection.close()
            otherRig.stop()
        }
        await #expect(throws: SimulatedATTError(code: 0xFD)) {
            try await otherCentral.subscribe(serviceUUID: "180D", characteristicUUID: "2A37", indications: false)
        }
        #expect(app.count("StartNotify") == 0)
        #expect(otherApp.count("StartNotify") == 0)
    }
}
