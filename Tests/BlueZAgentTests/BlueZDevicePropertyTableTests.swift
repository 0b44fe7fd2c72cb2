import BlueZ
import DBus
import Testing

/// The `Device1` properties are named once, in BlueZ (issue 36): each has one name, names read
/// back as the property, and the advertisement-carrying ones are those bluetoothd updates when
/// it receives an advertisement.
@Suite(.timeLimit(.minutes(5))) struct BlueZDevicePropertyTableTests {
    typealias Property = BlueZDeviceProperties.Property

    @Test func everyPropertyHasItsOwnNameAndReadsBack() {
        #expect(Set(Property.allCases.map(\.name)).count == Property.allCases.count)
        for property in Property.allCases { #expect(Property(name: property.name) == property) }
        #expect(Property(name: "Icon") == nil)
        #expect(Property(name: "connected") == nil)
    }

    @Test func theAdvertisementPropertiesAreTheAdvertisingOnes() {
        let advertising = Set(Property.allCases.filter(\.carriesAdvertisement).map(\.name))
        #expect(
            advertising == [
                "RSSI", "TxPower", "ManufacturerData", "ServiceData", "AdvertisingFlags", "AdvertisingData",
            ])
    }

    @Test func propertiesAreReadUnderTheirNames() throws {
        let device = BlueZDeviceProperties([
            "Address": .string("AA:BB:CC:DD:EE:FF"), "Name": .string("n"), "Connected": .bool(true),
            "ServicesResolved": .bool(true), "RSSI": .int16(-40),
            "Adapter": .objectPath(try ObjectPath("/org/bluez/hci0")),
        ])
        #expect(device.address == "AA:BB:CC:DD:EE:FF" && device.name == "n" && device.connected)
        #expect(device.servicesResolved && device.rssi == -40 && device.adapter?.rawValue == "/org/bluez/hci0")
    }
}
