import BlueZKit
import Foundation
import Testing

@Suite("AdvertisementData", .timeLimit(.minutes(5)))
struct AdvertisementDataTests {
    static let full = AdvertisementData(
        localName: "Heart",
        manufacturerData: Data([0x4C, 0x00, 0x02, 0x15]),
        serviceData: ["180D": Data([0x01, 0x02])],
        serviceUUIDs: ["180D", "180F"],
        overflowServiceUUIDs: ["71DA3FD1-7E10-41C1-B16F-4430B506CDE7"],
        txPowerLevel: -8,
        isConnectable: true,
        solicitedServiceUUIDs: ["1812"]
    )

    @Test func subscriptAnswersCoreBluetoothKeysWithCoreBluetoothTypes() {
        let ad = Self.full
        #expect(ad[CBAdvertisementDataLocalNameKey] as? String == "Heart")
        #expect(ad[CBAdvertisementDataManufacturerDataKey] as? Data == Data([0x4C, 0x00, 0x02, 0x15]))
        #expect(ad[CBAdvertisementDataServiceDataKey] as? [CBUUID: Data] == ["180D": Data([0x01, 0x02])])
        #expect(ad[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] == ["180D", "180F"])
        #expect(
            ad[CBAdvertisementDataOverflowServiceUUIDsKey] as? [CBUUID]
                == ["71DA3FD1-7E10-41C1-B16F-4430B506CDE7"])
        #expect(ad[CBAdvertisementDataTxPowerLevelKey] as? Int == -8)
        #expect((ad[CBAdvertisementDataTxPowerLevelKey] as? NSNumber)?.intValue == -8)
        #expect(ad[CBAdvertisementDataIsConnectable] as? Bool == true)
        #expect((ad[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue == true)
        #expect(ad[CBAdvertisementDataSolicitedServiceUUIDsKey] as? [CBUUID] == ["1812"])
        #expect(ad["kCBAdvDataLocalName"] as? String == "Heart")
        #expect(ad["kCBAdvDataChannel"] == nil)
    }

    @Test func absentAndEmptyValuesHaveNoKey() {
        let ad = AdvertisementData(localName: "x", serviceUUIDs: [])
        #expect(ad[CBAdvertisementDataServiceUUIDsKey] == nil)
        #expect(ad[CBAdvertisementDataServiceDataKey] == nil)
        #expect(ad[CBAdvertisementDataTxPowerLevelKey] == nil)
        #expect(ad[CBAdvertisementDataIsConnectable] == nil)
        #expect(Set(ad.dictionary.keys) == [CBAdvertisementDataLocalNameKey])
        #expect(AdvertisementData().dictionary.isEmpty)
    }

    @Test func dictionaryRoundTrips() throws {
        let dictionary = Self.full.dictionary
        #expect(dictionary.count == 8)
        #expect(try AdvertisementData(dictionary: dictionary) == Self.full)
        #expect(try AdvertisementData(dictionary: [:]) == AdvertisementData())
    }

    @Test func readsThePeripheralManagersDictionary() throws {
        let ad = try AdvertisementData(dictionary: [
            CBAdvertisementDataLocalNameKey: "Door lock",
            CBAdvertisementDataServiceUUIDsKey: [CBUUID(string: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7")],
            CBAdvertisementDataTxPowerLevelKey: NSNumber(value: -20),
            CBAdvertisementDataIsConnectable: NSNumber(value: true),
            "kCBAdvDataSomethingNew": 42,
        ])
        #expect(ad.localName == "Door lock")
        #expect(ad.serviceUUIDs == ["71DA3FD1-7E10-41C1-B16F-4430B506CDE7"])
        #expect(ad.txPowerLevel == -20)
        #expect(ad.isConnectable == true)
        #expect(
            try AdvertisementData(dictionary: [CBAdvertisementDataTxPowerLevelKey: Int8(-127)]).txPowerLevel == -127)
        #expect(try AdvertisementData(dictionary: [CBAdvertisementDataTxPowerLevelKey: UInt8(127)]).txPowerLevel == 127)
        #expect(try AdvertisementData(dictionary: [CBAdvertisementDataIsConnectable: 0]).isConnectable == false)
    }

    /// A value of the wrong type for each key.
    static func wrongValue(for key: String) -> Any {
        switch key {
        case CBAdvertisementDataLocalNameKey: Data("Heart".utf8)
        case CBAdvertisementDataManufacturerDataKey: "4C000215"
        case CBAdvertisementDataServiceDataKey: ["180D": Data([1])] as [String: Data]
        case CBAdvertisementDataServiceUUIDsKey: ["180D"] as [String]
        case CBAdvertisementDataOverflowServiceUUIDsKey: BluetoothUUID("180D")
        case CBAdvertisementDataTxPowerLevelKey: 3.5
        case CBAdvertisementDataIsConnectable: "yes"
        default: [Data()]
        }
    }

    static let keys = [
        CBAdvertisementDataLocalNameKey, CBAdvertisementDataManufacturerDataKey,
        CBAdvertisementDataServiceDataKey, CBAdvertisementDataServiceUUIDsKey,
        CBAdvertisementDataOverflowServiceUUIDsKey, CBAdvertisementDataTxPowerLevelKey,
        CBAdvertisementDataIsConnectable, CBAdvertisementDataSolicitedServiceUUIDsKey,
    ]

    @Test(arguments: keys)
    func rejectsAWrongValueType(_ key: String) {
        var dictionary = Self.full.dictionary
        dictionary[key] = Self.wrongValue(for: key)
        do {
            _ = try AdvertisementData(dictionary: dictionary)
            Issue.record("accepted \(Self.wrongValue(for: key)) for \(key)")
        } catch {
            #expect(error.code == .wrongValueType)
            #expect(error.key == key)
            #expect(error.message.contains(key))
        }
    }

    static let outOfRange: [(String, Int)] = [
        (CBAdvertisementDataTxPowerLevelKey, 128),
        (CBAdvertisementDataTxPowerLevelKey, -128),
        (CBAdvertisementDataIsConnectable, 2),
    ]

    @Test(arguments: outOfRange)
    func rejectsOutOfRangeNumbers(_ key: String, _ value: Int) {
        do {
            _ = try AdvertisementData(dictionary: [key: value])
            Issue.record("accepted \(value) for \(key)")
        } catch {
            #expect(error.key == key)
            #expect(error.code == (key == CBAdvertisementDataTxPowerLevelKey ? .valueOutOfRange : .wrongValueType))
        }
        #expect(throws: AdvertisementDataError.self) {
            try AdvertisementData(dictionary: [CBAdvertisementDataTxPowerLevelKey: UInt64.max])
        }
    }

    @Test func codableRoundTrips() throws {
        let data = try JSONEncoder().encode(Self.full)
        #expect(try JSONDecoder().decode(AdvertisementData.self, from: data) == Self.full)
    }
}
