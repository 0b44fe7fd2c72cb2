import BlueZKit
import Foundation
import Testing

/// Invalid passive-scan parameters are refused with a typed error before anything reaches bluetoothd.
@Suite(.timeLimit(.minutes(5))) struct PassiveScanValidationTests {
    /// The code of the error `make` throws; nil when it throws none (or not a ``BluetoothError``).
    static func code(_ make: () throws -> Void) -> BluetoothError.Code? {
        do {
            try make()
            return nil
        } catch {
            return (error as? BluetoothError)?.code
        }
    }

    @Test func refusesAnEmptyPattern() {
        #expect(Self.code { _ = try AdvertisementPattern(adType: 0xFF, bytes: Data()) } == .invalidParameters)
        #expect(Self.code { _ = try AdvertisementPattern.localName(prefix: "") } == .invalidParameters)
    }

    @Test(arguments: [(0, 32), (30, 2), (31, 1), (-1, 1), (200, 1)])
    func refusesPatternsBeyondThirtyOneBytes(offset: Int, length: Int) {
        #expect(
            Self.code {
                _ = try AdvertisementPattern(adType: 0xFF, offset: offset, bytes: Data(repeating: 1, count: length))
            }
                == .invalidParameters)
    }

    @Test func acceptsPatternsThatEndAtTheLastByte() throws {
        let pattern = try AdvertisementPattern(adType: 0x16, offset: 30, bytes: Data([0x0D]))
        #expect(pattern.offset == 30)
        #expect(try AdvertisementPattern(adType: 0xFF, bytes: Data(repeating: 7, count: 31)).bytes.count == 31)
    }

    @Test(arguments: [UInt8(0x00), 0x3E, 0x80, 0xFE])
    func refusesADTypesBlueZDoesNotMatch(adType: UInt8) {
        #expect(Self.code { _ = try AdvertisementPattern(adType: adType, bytes: Data([1])) } == .invalidParameters)
    }

    @Test func buildsManufacturerDataPatternsLittleEndian() throws {
        let pattern = try AdvertisementPattern.manufacturerData(companyIdentifier: 0x004C, prefix: Data([0x02, 0x15]))
        #expect(pattern.adType == 0xFF)
        #expect(pattern.offset == 0)
        #expect(pattern.bytes == Data([0x4C, 0x00, 0x02, 0x15]))
        #expect(
            Self.code {
                _ = try AdvertisementPattern.manufacturerData(companyIdentifier: 1, prefix: Data(count: 30))
            } == .invalidParameters)
    }

    @Test func refusesAPassiveScanWithoutPatterns() {
        #expect(Self.code { _ = try PassiveScan(patterns: []) } == .invalidParameters)
    }

    @Test func refusesRSSIValuesBluetoothdWouldRefuse() {
        #expect(Self.code { _ = try RSSIThresholds(highThreshold: 21, lowThreshold: -80) } == .invalidParameters)
        #expect(Self.code { _ = try RSSIThresholds(highThreshold: -60, lowThreshold: -128) } == .invalidParameters)
        #expect(Self.code { _ = try RSSIThresholds(highThreshold: -80, lowThreshold: -60) } == .invalidParameters)
        #expect(
            Self.code { _ = try RSSIThresholds(highThreshold: -60, highTimeout: 0, lowThreshold: -80) }
                == .invalidParameters)
        #expect(
            Self.code { _ = try RSSIThresholds(highThreshold: -60, lowThreshold: -80, lowTimeout: 301) }
                == .invalidParameters)
        #expect(
            Self.code { _ = try RSSIThresholds(highThreshold: -60, lowThreshold: -80, samplingPeriod: 256) }
                == .invalidParameters)
        #expect(Self.code { _ = try RSSIThresholds(highThreshold: -60, lowThreshold: -60, samplingPeriod: 255) } == nil)
    }

    @Test func theMissingFlagErrorNamesIt() {
        let error = BluetoothError(.advertisementMonitorUnavailable)
        #expect(error.code.rawValue == 106)
        #expect(error.message.contains("--experimental (-E)"))
        #expect(error.localizedDescription == error.message)
    }
}
