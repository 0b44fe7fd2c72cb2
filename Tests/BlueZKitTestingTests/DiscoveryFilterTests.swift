import BlueZKitTesting
import DBus
import Testing

@Suite(.timeLimit(.minutes(5))) struct DiscoveryFilterTests {
    static let invalidFilters: [[String: DBusValue]] = [
        ["Unknown": .bool(true)],
        ["AutoConnect": .bool(true)],
        ["UUIDs": .string(uuid16("180d"))],
        ["UUIDs": .stringArray(["not-a-uuid"])],
        ["UUIDs": .array(element: "i", [.int32(1)])],
        ["RSSI": .int32(-60)],
        ["RSSI": .int16(-128)],
        ["RSSI": .int16(21)],
        ["Pathloss": .uint16(138)],
        ["Pathloss": .int16(10)],
        ["RSSI": .int16(-60), "Pathloss": .uint16(10)],
        ["Transport": .string("usb")],
        ["Transport": .bool(true)],
        ["DuplicateData": .string("yes")],
        ["Discoverable": .int32(1)],
        ["Pattern": .bool(false)],
    ]

    @Test(arguments: invalidFilters)
    func invalidFiltersAreInvalidArguments(_ entries: [String: DBusValue]) async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let error = await rig.client.error(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(entries)])
        #expect(error?.name == "org.bluez.Error.InvalidArguments")
        #expect(error?.message == "Invalid arguments in method call")
    }

    @Test func validFiltersAreAccepted() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let valid: [[String: DBusValue]] = [
            [:],
            ["UUIDs": .stringArray(["180D", "0x180f", "0000aa00-0000-1000-8000-00805f9b34fb"])],
            ["RSSI": .int16(-127)], ["RSSI": .int16(20)], ["Pathloss": .uint16(137)],
            ["Transport": .string("le")], ["Transport": .string("bredr")], ["Transport": .string("auto")],
            ["DuplicateData": .bool(true), "Discoverable": .bool(false), "Pattern": .string("C0:")],
        ]
        for entries in valid {
            let error = await rig.client.error(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter(entries)])
            #expect(error == nil, "\(entries)")
        }
    }

    @Test func getDiscoveryFiltersListsBlueZKeys() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let reply = try await rig.client.call(adapterPath, adapterInterface, "GetDiscoveryFilters")
        #expect(
            reply.first?.stringArrayValue == [
                "UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern",
            ])
    }

    @Test func discoveryNeedsPower() async throws {
        let rig = try await Rig.start(adapters: [.init(powered: false)])
        defer { rig.stop() }
        for member in ["StartDiscovery", "StopDiscovery"] {
            let error = await rig.client.error(adapterPath, adapterInterface, member)
            #expect(error?.name == "org.bluez.Error.NotReady", "\(member)")
        }
        let error = await rig.client.error(adapterPath, adapterInterface, "SetDiscoveryFilter", [filter([:])])
        #expect(error?.name == "org.bluez.Error.NotReady")
    }
}
