import BlueZ
import Foundation

/// What an advertisement says, in Core Bluetooth's terms, and whether a scan's filters admit it.
extension CentralEngine {
    /// Core Bluetooth's advertisement data from BlueZ's Device1 properties and the service UUIDs
    /// the device advertised (``noteAdvertisedServices(_:_:)``), never its GATT services.
    ///
    /// Manufacturer and service data are bluetoothd's: per company identifier and per service
    /// UUID, the last value received since bluetoothd made the device object, scan responses
    /// included; a scan that allows duplicates (`DuplicateData`) makes each advertisement that
    /// carries either kind replace that kind's whole set (`device_set_manufacturer_data` and
    /// `device_set_service_data` in src/device.c, 5.66 to 5.87).
    ///
    /// `isConnectable` is always true: bluetoothd keeps whether an advertisement was connectable
    /// to itself (no `Device1` property says it, 5.66 to 5.87), and code that connects only to
    /// peripherals advertising as connectable must still connect. A connection to one that is
    /// not stays pending, as with a peripheral out of range.
    static func advertisementData(_ device: BlueZDeviceProperties, serviceUUIDs: [BluetoothUUID]) -> AdvertisementData {
        var manufacturer: Data? = nil
        if let (company, payload) = device.manufacturerData.min(by: { $0.key < $1.key }) {
            manufacturer = Data([UInt8(company & 0xFF), UInt8(company >> 8)] + payload)
        }
        var serviceData: [BluetoothUUID: Data] = [:]
        for (uuid, bytes) in device.serviceData {
            if let key = BluetoothUUID(parsing: uuid) { serviceData[key] = Data(bytes) }
        }
        return AdvertisementData(
            localName: device.name,
            manufacturerData: manufacturer,
            serviceData: serviceData,
            serviceUUIDs: serviceUUIDs,
            txPowerLevel: device.txPower.map(Int.init),
            isConnectable: true,
            solicitedServiceUUIDs: solicited(device.advertisingData))
    }

    /// bluetoothd's `Pattern` rule (`device_is_discoverable` in `src/adapter.c`, 5.54 to 5.87):
    /// the empty pattern, or a byte-wise prefix of the device's address (`AA:BB:…`, upper case)
    /// or of its name.
    static func matches(pattern: String, _ device: BlueZDeviceProperties) -> Bool {
        let prefix = Array(pattern.utf8)
        return prefix.isEmpty || device.address.map { $0.utf8.starts(with: prefix) } == true
            || device.name.map { $0.utf8.starts(with: prefix) } == true
    }

    /// Remembers the service UUIDs `device` advertised while bluetoothd's `UUIDs` says them (on the
    /// queue): once bluetoothd resolves the device's services, `UUIDs` holds those instead and
    /// nothing on the bus says what the device advertises (``BlueZClient/advertisedUUIDs(of:_:)``),
    /// so the last advertised list stands until the device goes.
    func noteAdvertisedServices(_ id: DeviceID, _ device: BlueZDeviceProperties) {
        guard let uuids = client.advertisedUUIDs(of: id, device) else { return }
        advertisedServices[id] = uuids.compactMap(BluetoothUUID.init(parsing:))
    }

    /// Solicited service UUIDs from raw advertising data (AD types 0x14, 0x15, 0x1F).
    ///
    /// bluetoothd 5.66 to 5.87 never puts these types in `AdvertisingData` (`type_reject_list` in
    /// src/shared/ad.c), so on a real bluetoothd this finds none.
    static func solicited(_ advertisingData: [UInt8: [UInt8]]) -> [BluetoothUUID] {
        var uuids: [BluetoothUUID] = []
        for (type, width) in [(UInt8(0x14), 2), (0x1F, 4), (0x15, 16)] {
            guard let bytes = advertisingData[type], bytes.count % width == 0 else { continue }
            for start in stride(from: 0, to: bytes.count, by: width) {
                // AD fields are little-endian; BluetoothUUID's data is big-endian.
                if let uuid = BluetoothUUID(parsing: Data(bytes[start..<start + width].reversed())) {
                    uuids.append(uuid)
                }
            }
        }
        return uuids
    }
}
