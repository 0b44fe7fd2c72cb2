import BlueZKitTesting
import DBus
import Testing

/// A peripheral's GATT database changing while connected: the signals of BlueZ 5.66's Service Changed handling.
@Suite(.timeLimit(.minutes(5))) struct ServiceChangeTests {
    static let newService = HeartRateSensor.path + "/service0012"

    /// The ObjectManager signals and `Device1` changes since `mark`, as "member path [detail]".
    static func trace(_ rig: Rig, since mark: Int) -> [String] {
        rig.client.signals.since(mark).compactMap { signal in
            switch signal.member {
            case "InterfacesRemoved": return "removed \(signal.objectPath) \(signal.removed)"
            case "InterfacesAdded": return "added \(signal.objectPath) \(signal.added.keys.sorted())"
            case "PropertiesChanged" where signal.changedInterface == deviceInterface:
                return "changed \(signal.path) \((Array(signal.changed.keys) + signal.invalidated).sorted())"
            default: return nil
            }
        }
    }

    @Test func replacingAServiceRemovesItsObjectsThenExportsTheNewOnes() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        let replacement = SimulatedService(
            uuid: "181A", characteristics: [SimulatedCharacteristic(uuid: "2A6E", flags: ["read"], value: [7])])
        try sensor.peripheral.replaceService(uuid: "0000AA00-0000-1000-8000-00805F9B34FB", with: replacement)
        _ = await rig.client.signals.expect(from: mark, "the new characteristic") {
            $0.member == "InterfacesAdded" && $0.objectPath == Self.newService + "/char0013"
        }
        let custom = HeartRateSensor.customService
        #expect(
            Self.trace(rig, since: mark) == [
                "removed \(HeartRateSensor.userDescriptionPath) [\"org.bluez.GattDescriptor1\"]",
                "removed \(HeartRateSensor.dataPath) [\"\(characteristicInterface)\"]",
                "removed \(HeartRateSensor.commandPath) [\"\(characteristicInterface)\"]",
                "removed \(HeartRateSensor.secretPath) [\"\(characteristicInterface)\"]",
                "removed \(HeartRateSensor.failingPath) [\"\(characteristicInterface)\"]",
                "removed \(custom) [\"org.bluez.GattService1\"]",
                "changed \(HeartRateSensor.path) [\"UUIDs\"]",
                "added \(Self.newService) [\"org.bluez.GattService1\"]",
                "added \(Self.newService)/char0013 [\"\(characteristicInterface)\"]",
            ])
        let added = rig.client.signals.since(mark).first { $0.member == "InterfacesAdded" }
        #expect(added?.added["org.bluez.GattService1"]?["UUID"] == .string(uuid16("181A")))
        #expect(sensor.peripheral.services.map(\.uuid) == ["180D", "181A"])
    }

    @Test func removingAServiceKeepsTheOthersWhereTheyAreAndStaysChangedAfterReconnecting() async throws {
        let rig = try await Rig.start()
        defer { rig.stop() }
        let sensor = try await connectSensor(rig)
        let mark = rig.client.signals.count
        try sensor.peripheral.removeService(uuid: "180D")
        _ = await rig.client.signals.expect(from: mark, "the service removed") {
            $0.member == "InterfacesRemoved" && $0.objectPath == HeartRateSensor.heartRateService
        }
        _ = await rig.client.signals.expect(from: mark, "UUIDs changed") {
            $0.isPropertiesChanged && $0.path == HeartRateSensor.path && $0.changed["UUIDs"] != nil
        }
        let trace = Self.trace(rig, since: mark)
        #expect(trace.filter { $0.hasPrefix("removed") }.count == 5)  // a CCCD, 3 characteristics, the service
        #expect(!trace.contains { $0.contains(HeartRateSensor.customService) || $0.hasPrefix("added") })
        #expect(!trace.contains { $0.contains("ServicesResolved") })
        #expect(throws: SimulatedBlueZError.self) { try sensor.peripheral.removeService(uuid: "180D") }

        // The next connection finds the changed database.
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Disconnect")
        let again = rig.client.signals.count
        try await rig.client.call(HeartRateSensor.path, deviceInterface, "Connect")
        _ = await rig.client.signals.expect(from: again, "ServicesResolved") {
            $0.changes(HeartRateSensor.path, deviceInterface, "ServicesResolved", to: .bool(true))
        }
        let services = try await rig.client.managedObjects().filter { $0.value["org.bluez.GattService1"] != nil }
        #expect(services.keys.sorted() == [HeartRateSensor.path + "/service0006", HeartRateSensor.customService])
    }
}
