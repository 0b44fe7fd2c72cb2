import BlueZ
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

}
