import BlueZKitTesting
import DBus
import Testing

/// A heart-rate sensor with a second, custom service: every kind of characteristic the tests need.
///
/// Handles (with the standard services): GAP `0x0001`–`0x0005` (hidden),
/// GATT `0x0006` (Service Changed `0x0007`, CCCD `0x0009`), Heart Rate
/// `0x000a`: Measurement `0x000b` (CCCD `0x000d`), Body Sensor Location
/// `0x000e`, Control Point `0x0010`; custom service `0x0012`: data `0x0013`
/// (User Description `0x0015`), command `0x0016`, secret `0x0018`, failing `0x001a`.
struct HeartRateSensor {
    let peripheral: SimulatedPeripheral
    let measurement = SimulatedCharacteristic(uuid: "2A37", flags: ["notify"])
    let location = SimulatedCharacteristic(uuid: "2A38", flags: ["read"], value: [1])
    let controlPoint = SimulatedCharacteristic(uuid: "2A39", flags: ["write"])
    let userDescription = SimulatedDescriptor(uuid: "2901", flags: ["read", "write"], value: Array("data".utf8))
    let data: SimulatedCharacteristic
    let command = SimulatedCharacteristic(
        uuid: "0000AA02-0000-1000-8000-00805F9B34FB", flags: ["write-without-response"])
    let secret = SimulatedCharacteristic(
        uuid: "0000AA03-0000-1000-8000-00805F9B34FB", flags: ["encrypt-read"], value: [0x5e])
    let failing = SimulatedCharacteristic(
        uuid: "0000AA04-0000-1000-8000-00805F9B34FB", flags: ["read", "write"],
        onRead: { _ throws(SimulatedATTError) in throw SimulatedATTError(code: 0x80) },
        onWrite: { _ throws(SimulatedATTError) in throw .invalidAttributeValueLength })

    static let address = "C0:FF:EE:00:00:01"
    static let path = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let heartRateService = path + "/service000a"
    static let measurementPath = heartRateService + "/char000b"
    static let measurementCCCD = measurementPath + "/desc000d"
    static let locationPath = heartRateService + "/char000e"
    static let controlPointPath = heartRateService + "/char0010"
    static let customService = path + "/service0012"
    static let dataPath = customService + "/char0013"
    static let userDescriptionPath = dataPath + "/desc0015"
    static let commandPath = customService + "/char0016"
    static let secretPath = customService + "/char0018"
    static let failingPath = customService + "/char001a"

    init(address: String = HeartRateSensor.address, name: String = "HRM", rssi: Int16 = -55) {
        data = SimulatedCharacteristic(
            uuid: "0000AA01-0000-1000-8000-00805F9B34FB", flags: ["read", "write"], value: Array("hello".utf8),
            descriptors: [userDescription])
        peripheral = SimulatedPeripheral(
            address: address, name: name, rssi: rssi, txPower: 4, serviceUUIDs: ["180D"],
            manufacturerData: [0x004C: [1, 2]], serviceData: ["180D": [9]],
            services: [
                SimulatedService(uuid: "180D", characteristics: [measurement, location, controlPoint]),
                SimulatedService(
                    uuid: "0000AA00-0000-1000-8000-00805F9B34FB", characteristics: [data, command, secret, failing]),
            ])
    }
}

/// Adds the sensor, discovers it, connects and waits for `ServicesResolved` and for every GATT
/// object's `InterfacesAdded`.
///
/// bluetoothd sends `ServicesResolved` BEFORE the services' `InterfacesAdded` (as the simulator
/// does), so a test that marks the signals right after `ServicesResolved` could, under load,
/// find the first connection's exports in what follows its mark (seen under TSan in CI).
@discardableResult
func connectSensor(_ rig: Rig, _ sensor: HeartRateSensor = HeartRateSensor()) async throws -> HeartRateSensor {
    try rig.bluez.addPeripheral(sensor.peripheral)
    try await startDiscovery(rig.client)
    _ = await rig.client.signals.expect("device found") {
        $0.member == "InterfacesAdded" && $0.objectPath == HeartRateSensor.path
    }
    let mark = rig.client.signals.count
    try await rig.client.call(HeartRateSensor.path, deviceInterface, "Connect")
    _ = await rig.client.signals.expect(from: mark, "ServicesResolved") {
        $0.changes(HeartRateSensor.path, deviceInterface, "ServicesResolved", to: .bool(true))
    }
    let exported = try await rig.client.managedObjects().keys.filter { $0.hasPrefix(HeartRateSensor.path + "/") }
    #expect(!exported.isEmpty, "the sensor's GATT objects are exported")
    for path in exported {
        _ = await rig.client.signals.expect(from: mark, "\(path) exported") {
            $0.member == "InterfacesAdded" && $0.objectPath == path
        }
    }
    return sensor
}
