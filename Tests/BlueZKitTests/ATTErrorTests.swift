import BlueZ
import BlueZKit
import Foundation
import Testing

@Suite("ATTError", .timeLimit(.minutes(5)))
struct ATTErrorTests {
    static let coreBluetoothValues: [(ATTError.Code, Int)] = [
        (.success, 0x00), (.invalidHandle, 0x01), (.readNotPermitted, 0x02), (.writeNotPermitted, 0x03),
        (.invalidPdu, 0x04), (.insufficientAuthentication, 0x05), (.requestNotSupported, 0x06),
        (.invalidOffset, 0x07), (.insufficientAuthorization, 0x08), (.prepareQueueFull, 0x09),
        (.attributeNotFound, 0x0A), (.attributeNotLong, 0x0B), (.insufficientEncryptionKeySize, 0x0C),
        (.invalidAttributeValueLength, 0x0D), (.unlikelyError, 0x0E), (.insufficientEncryption, 0x0F),
        (.unsupportedGroupType, 0x10), (.insufficientResources, 0x11),
    ]

    @Test(arguments: coreBluetoothValues)
    func rawValuesAreCoreBluetooths(_ code: ATTError.Code, _ raw: Int) {
        #expect(code.rawValue == raw)
        #expect(ATTError.Code(rawValue: raw) == code)
        #expect(ATTError.Code(UInt8(raw)) == code)
        #expect(code.description.hasSuffix(String(format: "(0x%02x)", raw)))
    }

    @Test func everyByteHasExactlyOneCode() {
        #expect(ATTError.Code.namedCodes.count == 18)
        for byte in UInt8.min...UInt8.max {
            let code = ATTError.Code(byte)
            #expect(code.byte == byte)
            #expect(code.rawValue == Int(byte))
            #expect(ATTError.Code(rawValue: Int(byte)) == code)
            switch byte {
            case 0x00...0x11:
                #expect(code == ATTError.Code.namedCodes[Int(byte)])
                #expect(!code.isApplicationError)
            case 0x80...0x9F:
                #expect(code == .application(byte))
                if case .application(let inner) = code { #expect(inner == byte) } else { Issue.record("\(byte)") }
                #expect(code.isApplicationError)
            default:
                if case .other(let inner) = code { #expect(inner == byte) } else { Issue.record("\(byte)") }
                #expect(!code.isApplicationError)
            }
        }
        #expect(ATTError.Code(rawValue: -1) == nil)
        #expect(ATTError.Code(rawValue: 256) == nil)
    }

    @Test func codesCompareByByte() {
        #expect(ATTError.Code.other(0x01) == .invalidHandle)
        #expect(ATTError.Code.application(0x85) != .application(0x86))
        #expect(Set([ATTError.Code.other(0x0E), .unlikelyError]).count == 1)
        #expect(ATTError.Code.application(0x85).description == "application (0x85)")
        #expect(ATTError.Code.invalidOffset.description == "invalidOffset (0x07)")
    }

    @Test func errorsCompareByCodeAndMessageAndMatchInCatch() throws {
        struct Cause: Error {}
        let a = ATTError(.invalidOffset, underlying: Cause())
        let b = ATTError(.invalidOffset)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.message == ATTError.Code.invalidOffset.message)
        #expect(a != ATTError(.invalidOffset, message: "other"))
        #expect(a != ATTError(.invalidHandle))
        #expect(a.underlying is Cause)
        #expect(a.description.contains("underlying"))
        #expect(!b.description.contains("underlying"))
        do {
            throw b
        } catch CBATTError.invalidHandle {
            Issue.record("matched the wrong code")
        } catch ATTError.invalidOffset {
            // expected
        } catch {
            Issue.record("not matched: \(error)")
        }
    }

    // MARK: Our GATT server's replies → what BlueZ 5.66 tells the central

    /// BlueZ 5.66's `dbus_error_to_att_ecode` (src/gatt-database.c), as a test
    /// oracle: the ATT code the central receives for a reply error.
    static func bluezAnswers(name: String, message: String, permissionError: UInt8) -> UInt8 {
        switch name {
        case "org.bluez.Error.Failed":
            guard message.hasPrefix("0x"), let value = UInt32(message.dropFirst(2), radix: 16) else { return 0x80 }
            return (0x80...0x9F).contains(value) ? UInt8(value) : 0x0E
        case "org.bluez.Error.NotSupported": return 0x06
        case "org.bluez.Error.NotAuthorized": return 0x08
        case "org.bluez.Error.InvalidValueLength": return 0x0D
        case "org.bluez.Error.InvalidOffset": return 0x07
        case "org.bluez.Error.InProgress": return 0xFE
        case "org.bluez.Error.NotPermitted": return permissionError
        default: return 0x0E
        }
    }

    /// What the central should see when we answer with `byte`.
    static func expectedOnTheAir(_ byte: UInt8, permissionError: UInt8) -> UInt8 {
        switch byte {
        case 0x02, 0x03: permissionError
        case 0x05, 0x08, 0x0F: 0x08
        case 0x06, 0x07, 0x0D, 0x80...0x9F, 0xFE: byte
        default: 0x0E
        }
    }

    @Test func serverRepliesForEveryCode() throws {
        #expect(ATTError.Code.success.bluezReplyError == nil)
        for byte in UInt8(1)...UInt8.max {
            let reply = try #require(ATTError.Code(byte).bluezReplyError)
            let name = BlueZError(reply.code, reply.message).name
            #expect(name.hasPrefix("org.bluez.Error."))
            #expect(!reply.message.isEmpty)
            for permissionError: UInt8 in [0x02, 0x03] {
                let answered = Self.bluezAnswers(
                    name: name, message: reply.message,
                    permissionError: permissionError)
                #expect(
                    answered == Self.expectedOnTheAir(byte, permissionError: permissionError),
                    "code \(ATTError.Code(byte)) -> \(reply)")
            }
        }
    }

    static let serverTable: [(ATTError.Code, String, String?)] = [
        (.readNotPermitted, "org.bluez.Error.NotPermitted", nil),
        (.writeNotPermitted, "org.bluez.Error.NotPermitted", nil),
        (.insufficientAuthentication, "org.bluez.Error.NotAuthorized", nil),
        (.insufficientAuthorization, "org.bluez.Error.NotAuthorized", nil),
        (.insufficientEncryption, "org.bluez.Error.NotAuthorized", nil),
        (.invalidOffset, "org.bluez.Error.InvalidOffset", nil),
        (.invalidAttributeValueLength, "org.bluez.Error.InvalidValueLength", nil),
        (.requestNotSupported, "org.bluez.Error.NotSupported", nil),
        (.application(0x80), "org.bluez.Error.Failed", "0x80"),
        (.application(0x9F), "org.bluez.Error.Failed", "0x9f"),
        (.unlikelyError, "org.bluez.Error.Failed", "0x0e"),
        (.invalidHandle, "org.bluez.Error.Failed", "0x01"),
        (.insufficientResources, "org.bluez.Error.Failed", "0x11"),
        (.other(0xFE), "org.bluez.Error.InProgress", nil),
        (.other(0xFD), "org.bluez.Error.ImproperlyConfigured", nil),
    ]

    @Test(arguments: serverTable)
    func serverReplyNames(_ code: ATTError.Code, _ name: String, _ message: String?) throws {
        let reply = try #require(code.bluezReplyError)
        #expect(BlueZError(reply.code, reply.message).name == name)
        if let message { #expect(reply.message == message) }
    }

    // MARK: BlueZ's replies to our remote operations → ATT codes

    /// BlueZ 5.66's `create_gatt_dbus_error` (src/gatt-client.c), as a test
    /// oracle: the D-Bus error a failed remote operation returns.
    static func bluezClientError(_ byte: UInt8) -> (String, String) {
        switch byte {
        case 0x02: ("org.bluez.Error.NotPermitted", "Read not permitted")
        case 0x03: ("org.bluez.Error.NotPermitted", "Write not permitted")
        case 0x05, 0x0C, 0x0F: ("org.bluez.Error.NotPermitted", "Not paired")
        case 0x07: ("org.bluez.Error.InvalidArguments", "Invalid offset")
        case 0x0D: ("org.bluez.Error.InvalidArguments", "Invalid Length")
        case 0x08: ("org.bluez.Error.NotAuthorized", "Operation Not Authorized")
        case 0x06: ("org.bluez.Error.NotSupported", "Operation is not supported")
        case 0x00: ("org.bluez.Error.Failed", "Operation failed")
        default: ("org.bluez.Error.Failed", String(format: "Operation failed with ATT error: 0x%02x", byte))
        }
    }

    @Test func remoteErrorsForEveryCode() {
        for byte in UInt8.min...UInt8.max {
            let (name, message) = Self.bluezClientError(byte)
            let code = ATTError.Code(bluez: BlueZError(name: name, message: message))
            switch byte {
            case 0x00: #expect(code == nil)
            case 0x05, 0x0C, 0x0F: #expect(code == .insufficientAuthentication)
            default: #expect(code == ATTError.Code(byte), "\(name): \(message)")
            }
        }
    }

    static let clientTable: [(String, String, ATTError.Code?)] = [
        ("org.bluez.Error.NotPermitted", "Write acquired", nil),
        ("org.bluez.Error.NotPermitted", "Notify acquired", nil),
        ("org.bluez.Error.NotPermitted", "read not permitted", .readNotPermitted),
        ("org.bluez.Error.InvalidArguments", "Invalid arguments in method call", nil),
        ("org.bluez.Error.InvalidOffset", "Invalid offset", .invalidOffset),
        ("org.bluez.Error.InvalidValueLength", "Invalid value length", .invalidAttributeValueLength),
        ("org.bluez.Error.NotAuthorized", "", .insufficientAuthorization),
        ("org.bluez.Error.NotSupported", "", .requestNotSupported),
        ("org.bluez.Error.Failed", "ATT error: 0x0a", .attributeNotFound),
        ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x85", .application(0x85)),
        ("org.bluez.Error.Failed", "Operation failed with ATT error: 0xFE", .other(0xFE)),
        ("org.bluez.Error.Failed", "ATT error: 0x", nil),
        ("org.bluez.Error.Failed", "ATT error: 0x123", nil),
        ("org.bluez.Error.Failed", "ATT error: 0xzz", nil),
        ("org.bluez.Error.Failed", "Not connected", nil),
        ("org.bluez.Error.Failed", "Input/output error", nil),
        ("org.bluez.Error.InProgress", "In Progress", nil),
        ("org.freedesktop.DBus.Error.NoReply", "ATT error: 0x0a", nil),
        ("org.bluez.Error.Unknown", "", nil),
    ]

    @Test(arguments: clientTable)
    func remoteErrorTable(_ name: String, _ message: String, _ expected: ATTError.Code?) {
        #expect(ATTError.Code(bluez: BlueZError(name: name, message: message)) == expected)
    }

    @Test func remoteErrorKeepsTheUnderlyingError() throws {
        let bluez = BlueZError(name: "org.bluez.Error.NotAuthorized", message: "Operation Not Authorized")
        let error = try #require(ATTError(bluez: bluez))
        #expect(error.code == .insufficientAuthorization)
        #expect(error.underlying as? BlueZError == bluez)
        #expect((error.underlying as? BlueZError)?.underlying?.name == "org.bluez.Error.NotAuthorized")
        #expect(ATTError(bluez: BlueZError(name: "org.bluez.Error.Failed", message: "Not connected")) == nil)
    }
}
