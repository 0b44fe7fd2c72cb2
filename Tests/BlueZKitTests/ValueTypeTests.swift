import BlueZKit
import Testing

@Suite("Enumerations, option sets and BluetoothError", .timeLimit(.minutes(5)))
struct ValueTypeTests {
    @Test func characteristicPropertiesHaveCoreBluetoothsRawValues() {
        let table: [(CharacteristicProperties, UInt)] = [
            (.broadcast, 0x01), (.read, 0x02), (.writeWithoutResponse, 0x04), (.write, 0x08),
            (.notify, 0x10), (.indicate, 0x20), (.authenticatedSignedWrites, 0x40),
            (.extendedProperties, 0x80), (.notifyEncryptionRequired, 0x100), (.indicateEncryptionRequired, 0x200),
        ]
        for (property, raw) in table { #expect(property.rawValue == raw, "\(property)") }
        #expect(CharacteristicProperties([.read, .notify]).names == ["read", "notify"])
        #expect(CharacteristicProperties(rawValue: 0x402).names == ["read", "0x400"])
    }

    @Test func attributePermissionsHaveCoreBluetoothsRawValues() {
        #expect(AttributePermissions.readable.rawValue == 1)
        #expect(AttributePermissions.writeable.rawValue == 2)
        #expect(AttributePermissions.readEncryptionRequired.rawValue == 4)
        #expect(AttributePermissions.writeEncryptionRequired.rawValue == 8)
        #expect(
            AttributePermissions([.readable, .writeEncryptionRequired]).names
                == ["readable", "writeEncryptionRequired"])
    }

    @Test func writeTypeAndStateHaveCoreBluetoothsRawValues() {
        #expect(CharacteristicWriteType.withResponse.rawValue == 0)
        #expect(CharacteristicWriteType.withoutResponse.rawValue == 1)
        #expect(ManagerState.allCases.map(\.rawValue) == [0, 1, 2, 3, 4, 5])
        // Swift's own text for an enum case: Core Bluetooth's CBManagerState has no description.
        #expect(
            ManagerState.allCases.map { "\($0)" }
                == ["unknown", "resetting", "unsupported", "unauthorized", "poweredOff", "poweredOn"])
        #expect(ManagerState(rawValue: 5) == .poweredOn)
        #expect(ManagerState(rawValue: 6) == nil)
    }

    @Test func bluetoothErrorCodesHaveCoreBluetoothsRawValues() {
        let coreBluetooth: [BluetoothError.Code] = [
            .unknown, .invalidParameters, .invalidHandle, .notConnected, .outOfSpace, .operationCancelled,
            .connectionTimeout, .peripheralDisconnected, .uuidNotAllowed, .alreadyAdvertising,
            .connectionFailed, .connectionLimitReached, .unknownDevice, .operationNotSupported,
            .peerRemovedPairingInformation, .encryptionTimedOut, .tooManyLEPairedDevices,
        ]
        #expect(coreBluetooth.map(\.rawValue) == Array(0...16))
        let linux: [BluetoothError.Code] = [
            .bluetoothUnavailable, .accessDenied, .adapterNotFound, .advertisingDataTooLarge, .restoreIdentifierInUse,
        ]
        #expect(linux.allSatisfy { $0.rawValue >= 100 })
        #expect(Set(BluetoothError.Code.allCases.map(\.rawValue)).count == BluetoothError.Code.allCases.count)
        #expect(Set(BluetoothError.Code.allCases.map(\.message)).count == BluetoothError.Code.allCases.count)
    }

    @Test func bluetoothErrorEqualityIgnoresTheUnderlyingError() {
        struct Cause: Error {}
        let a = BluetoothError(.connectionFailed, message: "le-connection-abort-by-local", underlying: Cause())
        let b = BluetoothError(.connectionFailed, message: "le-connection-abort-by-local")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != BluetoothError(.connectionFailed))
        #expect(a != BluetoothError(.connectionTimeout, message: "le-connection-abort-by-local"))
        #expect(BluetoothError(.notConnected).message == BluetoothError.Code.notConnected.message)
        #expect(a.underlying is Cause)
        #expect(a.description.contains("underlying"))
        #expect(!b.description.contains("underlying"))
    }

    @Test func bluetoothErrorMatchesInCatch() {
        do {
            throw BluetoothError(.peripheralDisconnected)
        } catch CBError.connectionTimeout {
            Issue.record("matched the wrong code")
        } catch BluetoothError.peripheralDisconnected {
            // expected
        } catch {
            Issue.record("not matched: \(error)")
        }
        let error: any Error = ATTError(.invalidHandle)
        #expect(!(BluetoothError.invalidHandle ~= error))
        #expect(ATTError.invalidHandle ~= error)
    }

    /// Apps describe Core Bluetooth's enumerations and option sets themselves, since Apple's
    /// have no description; BlueZKit's must not have one either, or the app's would be ignored.
    @Test func anAppsOwnDescriptionIsTheOneUsed() {
        #expect("\(CharacteristicWriteType.withoutResponse)" == "app: no response")
        #expect(String(describing: CharacteristicProperties.notify) == "app: properties 16")
        #expect(!(ManagerState.poweredOn is any CustomStringConvertible))
        #expect(!(AttributePermissions.readable is any CustomStringConvertible))
    }
}

// What an app ported from iOS has (Apple's types have no description of their own).
extension CharacteristicWriteType: CustomStringConvertible {
    var description: String { self == .withResponse ? "app: response" : "app: no response" }
}

extension CharacteristicProperties: CustomStringConvertible {
    var description: String { "app: properties \(rawValue)" }
}
