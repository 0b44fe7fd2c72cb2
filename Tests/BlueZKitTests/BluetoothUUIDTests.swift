import BlueZKit
import Foundation
import Testing

@Suite("BluetoothUUID", .timeLimit(.minutes(5)))
struct BluetoothUUIDTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        let input: String
        let uuidString: String
        let bluez: String
        let short: UInt16?
        let dataCount: Int
        var testDescription: String { "\"\(input)\"" }
    }

    static let heartRateLong = "0000180d-0000-1000-8000-00805f9b34fb"

    static let valid: [Valid] = [
        Valid(input: "180D", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(input: "180d", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(input: "0000180D", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        // Core Bluetooth accepts a 0x prefix, as the heart-rate tutorials write it.
        Valid(input: "0x180D", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(input: "0X180d", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(input: "0x0000180D", uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(
            input: "0x0000180D-0000-1000-8000-00805F9B34FB", uuidString: "180D", bluez: heartRateLong,
            short: 0x180D, dataCount: 2),
        Valid(
            input: "0000180D-0000-1000-8000-00805F9B34FB", uuidString: "180D", bluez: heartRateLong,
            short: 0x180D, dataCount: 2),
        Valid(input: heartRateLong, uuidString: "180D", bluez: heartRateLong, short: 0x180D, dataCount: 2),
        Valid(
            input: "0000", uuidString: "0000", bluez: "00000000-0000-1000-8000-00805f9b34fb",
            short: 0, dataCount: 2),
        Valid(
            input: "FFFF", uuidString: "FFFF", bluez: "0000ffff-0000-1000-8000-00805f9b34fb",
            short: 0xFFFF, dataCount: 2),
        Valid(
            input: "12345678", uuidString: "12345678", bluez: "12345678-0000-1000-8000-00805f9b34fb",
            short: nil, dataCount: 4),
        Valid(
            input: "00010000-0000-1000-8000-00805f9b34fb", uuidString: "00010000",
            bluez: "00010000-0000-1000-8000-00805f9b34fb", short: nil, dataCount: 4),
        Valid(
            input: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7", uuidString: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7",
            bluez: "71da3fd1-7e10-41c1-b16f-4430b506cde7", short: nil, dataCount: 16),
        Valid(
            input: "71da3fd1-7e10-41c1-b16f-4430B506CDE7", uuidString: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7",
            bluez: "71da3fd1-7e10-41c1-b16f-4430b506cde7", short: nil, dataCount: 16),
        // One bit away from the base UUID: not shortened.
        Valid(
            input: "0000180D-0000-1000-8000-00805F9B34FC", uuidString: "0000180D-0000-1000-8000-00805F9B34FC",
            bluez: "0000180d-0000-1000-8000-00805f9b34fc", short: nil, dataCount: 16),
        Valid(
            input: "0000180D-0001-1000-8000-00805F9B34FB", uuidString: "0000180D-0001-1000-8000-00805F9B34FB",
            bluez: "0000180d-0001-1000-8000-00805f9b34fb", short: nil, dataCount: 16),
    ]

    @Test(arguments: valid)
    func parsesValidStrings(_ row: Valid) throws {
        let uuid = try #require(BluetoothUUID(parsing: row.input))
        #expect(BluetoothUUID(string: row.input) == uuid)
        #expect(uuid.uuidString == row.uuidString)
        #expect(uuid.description == row.uuidString)
        #expect(uuid.bluezString == row.bluez)
        #expect(uuid.shortValue == row.short)
        #expect(uuid.data.count == row.dataCount)
        #expect(try BluetoothUUID(validating: row.input) == uuid)
        // The printed form parses back to the same value.
        #expect(BluetoothUUID(string: uuid.uuidString) == uuid)
        #expect(BluetoothUUID(string: uuid.bluezString) == uuid)
    }

    static let invalid: [(String, BluetoothUUIDError.Code)] = [
        ("", .empty),
        ("18", .invalidLength),
        ("180", .invalidLength),
        ("180D0", .invalidLength),
        ("180G", .invalidCharacter),
        ("0000180D-0000-1000-8000-00805F9B34F", .invalidLength),
        ("0000180D-0000-1000-8000-00805F9B34FB0", .invalidLength),
        ("0000180D00001000800000805F9B34FB", .invalidLength),
        ("{0000180D-0000-1000-8000-00805F9B34FB}", .invalidCharacter),
        (" 180D", .invalidCharacter),
        ("180D ", .invalidCharacter),
        ("180D\n", .invalidCharacter),
        (" 0000180D-0000-1000-8000-00805F9B34FB", .invalidCharacter),
        ("0x", .invalidCharacter),
        ("0x0x180D", .invalidCharacter),
        ("x180D", .invalidCharacter),
        ("0y180D", .invalidCharacter),
        ("１８０Ｄ", .invalidCharacter),
        ("18-D", .misplacedHyphen),
        ("0000-80D", .misplacedHyphen),
        ("0000180D0-000-1000-8000-00805F9B34FB", .misplacedHyphen),
        ("0000180D-0000-1000-8000-00805F9B34-B", .misplacedHyphen),
        ("------------------------------------", .misplacedHyphen),
    ]

    @Test(arguments: invalid)
    func rejectsInvalidStrings(_ input: String, _ code: BluetoothUUIDError.Code) {
        #expect(BluetoothUUID(parsing: input) == nil)
        #expect(throws: BluetoothUUIDError.self) { try BluetoothUUID(validating: input) }
        do {
            _ = try BluetoothUUID(validating: input)
        } catch {
            #expect(error.code == code)
            #expect(error.input == input)
            #expect(!error.message.isEmpty)
        }
    }

    @Test func shortAndLongFormsAreEqualWithTheSameHash() throws {
        let short: BluetoothUUID = "180D"
        let forms = [
            BluetoothUUID("0000180d-0000-1000-8000-00805f9b34fb"),
            BluetoothUUID("0000180D"),
            BluetoothUUID(0x180D),
            BluetoothUUID(uuid32: 0x180D),
            BluetoothUUID(data: Data([0x18, 0x0D])),
            try #require(BluetoothUUID(parsing: Data([0x18, 0x0D]))),
            BluetoothUUID(data: Data([0x00, 0x00, 0x18, 0x0D])),
            BluetoothUUID(nsuuid: try #require(UUID(uuidString: "0000180D-0000-1000-8000-00805F9B34FB"))),
            BluetoothUUID(try #require(UUID(uuidString: "0000180D-0000-1000-8000-00805F9B34FB"))),
        ]
        for form in forms {
            #expect(form == short)
            #expect(form.hashValue == short.hashValue)
        }
        #expect(Set(forms + [short]).count == 1)
        #expect(BluetoothUUID("180D") != BluetoothUUID("180F"))
        #expect(BluetoothUUID(uuid32: 0x0001_180D) != short)
    }

    @Test(arguments: valid)
    func dataRoundTrips(_ row: Valid) throws {
        let uuid = try #require(BluetoothUUID(parsing: row.input))
        #expect(BluetoothUUID(string: row.input) == uuid)
        #expect(BluetoothUUID(data: uuid.data) == uuid)
        #expect(try BluetoothUUID(validating: uuid.data) == uuid)
        // The full 16-byte form reads back to the same value too.
        let t = uuid.uuid.uuid
        let full = Data([t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7, t.8, t.9, t.10, t.11, t.12, t.13, t.14, t.15])
        #expect(BluetoothUUID(data: full) == uuid)
    }

    @Test func dataIsBigEndianAsCoreBluetooth() throws {
        #expect([UInt8](BluetoothUUID("180D").data) == [0x18, 0x0D])
        #expect([UInt8](BluetoothUUID("12345678").data) == [0x12, 0x34, 0x56, 0x78])
        let custom = BluetoothUUID("71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(
            [UInt8](custom.data) == [
                0x71, 0xDA, 0x3F, 0xD1, 0x7E, 0x10, 0x41, 0xC1,
                0xB1, 0x6F, 0x44, 0x30, 0xB5, 0x06, 0xCD, 0xE7,
            ])
        // Sixteen bytes of a base UUID are shortened on the way back out.
        let longBytes = Data([
            0x00, 0x00, 0x18, 0x0D, 0x00, 0x00, 0x10, 0x00,
            0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB,
        ])
        let fromLong = try #require(BluetoothUUID(parsing: longBytes))
        #expect(fromLong == BluetoothUUID("180D"))
        #expect(fromLong.data.count == 2)
        // A slice whose indices do not start at zero.
        let padded = Data([0xFF, 0x18, 0x0D, 0xFF])
        #expect(BluetoothUUID(data: padded[1..<3]) == BluetoothUUID("180D"))
    }

    @Test(arguments: [0, 1, 3, 5, 8, 15, 17, 32])
    func rejectsDataOfOtherLengths(_ count: Int) {
        let data = Data(repeating: 0xAB, count: count)
        #expect(BluetoothUUID(parsing: data) == nil)
        do {
            _ = try BluetoothUUID(validating: data)
            Issue.record("\(count) bytes were accepted")
        } catch {
            #expect(error.code == .invalidDataLength)
            #expect(error.input == String(repeating: "ab", count: count))
        }
    }

    @Test func foundationUUIDRoundTrips() throws {
        let foundation = try #require(UUID(uuidString: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7"))
        let uuid = BluetoothUUID(foundation)
        #expect(uuid.uuid == foundation)
        #expect(uuid.uuidString == foundation.uuidString)
        #expect(BluetoothUUID("180D").uuid.uuidString == "0000180D-0000-1000-8000-00805F9B34FB")
    }

    @Test func codableUsesTheString() throws {
        let values: [BluetoothUUID] = ["180D", "12345678", "71DA3FD1-7E10-41C1-B16F-4430B506CDE7"]
        let json = try JSONEncoder().encode(values)
        #expect(
            String(decoding: json, as: UTF8.self)
                == #"["180D","12345678","71DA3FD1-7E10-41C1-B16F-4430B506CDE7"]"#)
        #expect(try JSONDecoder().decode([BluetoothUUID].self, from: json) == values)
        let long = Data(#"["0000180d-0000-1000-8000-00805f9b34fb"]"#.utf8)
        #expect(try JSONDecoder().decode([BluetoothUUID].self, from: long) == ["180D"])
        let bad = Data(#"["180G"]"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([BluetoothUUID].self, from: bad) }
        // As a dictionary key it is the string too.
        let keyed: [BluetoothUUID: Int] = ["180D": 1]
        #expect(String(decoding: try JSONEncoder().encode(keyed), as: UTF8.self) == #"{"180D":1}"#)
        let longKey = Data(#"{"0000180d-0000-1000-8000-00805f9b34fb":1}"#.utf8)
        #expect(try JSONDecoder().decode([BluetoothUUID: Int].self, from: longKey) == keyed)
        let badKey = Data(#"{"180G":1}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([BluetoothUUID: Int].self, from: badKey) }
    }

    @Test func coreBluetoothsStringInitializerTrapsNamingTheText() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let text = "not a UUID"
            _ = CBUUID(string: text)
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains(#"CBUUID(string:): "not a UUID" is not a valid UUID string"#))
    }

    @Test func coreBluetoothsDataInitializerTrapsOnOtherLengths() async {
        await #expect(processExitsWith: .failure) {
            _ = CBUUID(data: Data([1, 2, 3]))
        }
    }

    @Test func anInvalidLiteralTraps() async {
        await #expect(processExitsWith: .failure) {
            let text = "180G"
            _ = BluetoothUUID(stringLiteral: text)
        }
    }
}
