import BlueZ
import BlueZKit
import Testing

@Suite("BlueZ GATT flags", .timeLimit(.minutes(5)))
struct BlueZGattFlagsTests {
    /// The characteristic flags listed in BlueZ's doc/org.bluez.GattCharacteristic.rst.
    static let documentedCharacteristicFlags: Set<String> = [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate",
        "authenticated-signed-writes", "extended-properties", "reliable-write", "writable-auxiliaries",
        "encrypt-read", "encrypt-write", "encrypt-notify", "encrypt-indicate",
        "encrypt-authenticated-read", "encrypt-authenticated-write", "encrypt-authenticated-notify",
        "encrypt-authenticated-indicate", "secure-read", "secure-write", "secure-notify", "secure-indicate",
        "authorize",
    ]
    /// The descriptor flags listed in BlueZ's doc/org.bluez.GattDescriptor.rst.
    static let documentedDescriptorFlags: Set<String> = [
        "read", "write", "encrypt-read", "encrypt-write", "encrypt-authenticated-read",
        "encrypt-authenticated-write", "secure-read", "secure-write", "authorize",
    ]

    struct Export: Sendable, CustomTestStringConvertible {
        let properties: CharacteristicProperties
        let permissions: AttributePermissions
        let flags: [String]
        var testDescription: String { "\(properties) \(permissions)" }
    }

    static let exports: [Export] = [
        Export(properties: .read, permissions: .readable, flags: ["read"]),
        Export(properties: .read, permissions: .readEncryptionRequired, flags: ["read", "encrypt-read"]),
        Export(properties: .read, permissions: [.readable, .readEncryptionRequired], flags: ["read", "encrypt-read"]),
        Export(properties: .read, permissions: [], flags: ["read"]),
        Export(properties: .write, permissions: .writeable, flags: ["write"]),
        Export(properties: .write, permissions: .writeEncryptionRequired, flags: ["write", "encrypt-write"]),
        Export(properties: .writeWithoutResponse, permissions: .writeable, flags: ["write-without-response"]),
        Export(
            properties: .writeWithoutResponse, permissions: .writeEncryptionRequired,
            flags: ["write-without-response", "encrypt-write"]),
        Export(
            properties: [.write, .writeWithoutResponse], permissions: .writeEncryptionRequired,
            flags: ["write-without-response", "write", "encrypt-write"]),
        Export(properties: .notify, permissions: [], flags: ["notify"]),
        Export(properties: .notifyEncryptionRequired, permissions: [], flags: ["notify", "encrypt-notify"]),
        Export(
            properties: [.notify, .notifyEncryptionRequired], permissions: [], flags: ["notify", "encrypt-notify"]),
        Export(properties: .indicate, permissions: [], flags: ["indicate"]),
        Export(properties: .indicateEncryptionRequired, permissions: [], flags: ["indicate", "encrypt-indicate"]),
        // The seed's e-mail characteristic.
        Export(
            properties: [.read, .notifyEncryptionRequired], permissions: .readEncryptionRequired,
            flags: ["read", "notify", "encrypt-read", "encrypt-notify"]),
        Export(
            properties: [
                .broadcast, .read, .writeWithoutResponse, .write, .notify, .indicate,
                .authenticatedSignedWrites, .extendedProperties,
            ],
            permissions: [.readable, .writeable],
            flags: [
                "broadcast", "read", "write-without-response", "write", "notify", "indicate",
                "authenticated-signed-writes", "extended-properties",
            ]),
        // Encryption permissions without the matching property add nothing.
        Export(
            properties: .notify, permissions: [.readEncryptionRequired, .writeEncryptionRequired], flags: ["notify"]),
        Export(
            properties: .authenticatedSignedWrites, permissions: .writeEncryptionRequired,
            flags: ["authenticated-signed-writes"]),
        // BlueZ rejects an empty Flags array.
        Export(properties: [], permissions: [], flags: ["authorize"]),
        Export(properties: [], permissions: [.readable, .writeable], flags: ["authorize"]),
    ]

    @Test(arguments: exports)
    func characteristicFlagsForExport(_ row: Export) {
        let flags = BlueZGattFlags(properties: row.properties, permissions: row.permissions).exportedNames
        #expect(flags == row.flags)
    }

    static let remote: [([String], CharacteristicProperties)] = [
        ([], []),
        (["read"], .read),
        (["read", "notify"], [.read, .notify]),
        (
            ["broadcast", "write-without-response", "authenticated-signed-writes"],
            [.broadcast, .writeWithoutResponse, .authenticatedSignedWrites]
        ),
        (["write", "indicate"], [.write, .indicate]),
        (["extended-properties", "reliable-write"], .extendedProperties),
        (["writable-auxiliaries", "write"], [.write, .extendedProperties]),
        (["encrypt-read"], .read),
        (["encrypt-authenticated-write"], .write),
        (["secure-read", "secure-write"], [.read, .write]),
        (["encrypt-notify"], [.notify, .notifyEncryptionRequired]),
        (["secure-indicate"], [.indicate, .indicateEncryptionRequired]),
        (["authorize"], []),
        (["bogus", "read", "READ", ""], .read),
    ]

    @Test(arguments: remote)
    func propertiesOfRemoteCharacteristic(_ flags: [String], _ expected: CharacteristicProperties) {
        #expect(CharacteristicProperties(bluez: BlueZGattFlags(names: flags)) == expected)
    }

    @Test func everyDocumentedFlagIsUnderstoodAndNothingElse() {
        #expect(Set(BlueZGattFlags.table.map(\.name)) == Self.documentedCharacteristicFlags)
        for (flag, name) in BlueZGattFlags.table where flag != .authorize {
            #expect(CharacteristicProperties(bluez: flag) != [], "\(name) declares nothing")
        }
    }

    /// The properties BlueZ will declare for what we export: notify/indicate
    /// with encryption imply the plain property, and "encrypt-write" declares
    /// write.
    static func declared(_ p: CharacteristicProperties, _ perms: AttributePermissions) -> CharacteristicProperties {
        var result = p
        if p.contains(.notifyEncryptionRequired) { result.insert(.notify) }
        if p.contains(.indicateEncryptionRequired) { result.insert(.indicate) }
        if p.contains(.writeWithoutResponse), perms.contains(.writeEncryptionRequired) { result.insert(.write) }
        return result
    }

    @Test func everyCombinationRoundTripsAndStaysWithinTheDocumentedFlags() {
        for rawProperties in UInt(0)..<0x400 {
            for rawPermissions in UInt(0)..<0x10 {
                let p = CharacteristicProperties(rawValue: rawProperties)
                let perms = AttributePermissions(rawValue: rawPermissions)
                let flags = BlueZGattFlags(properties: p, permissions: perms).exportedNames
                guard !flags.isEmpty, Set(flags).count == flags.count,
                    Set(flags).isSubset(of: Self.documentedCharacteristicFlags)
                else {
                    Issue.record("bad flags \(flags) for \(p) \(perms)")
                    return
                }
                let back = CharacteristicProperties(bluez: BlueZGattFlags(names: flags))
                if back != Self.declared(p, perms) {
                    Issue.record("\(p) \(perms) -> \(flags) -> \(back)")
                    return
                }
            }
        }
    }

    static let descriptors: [(AttributePermissions, [String])] = [
        ([], ["authorize"]),
        (.readable, ["read"]),
        (.writeable, ["write"]),
        ([.readable, .writeable], ["read", "write"]),
        (.readEncryptionRequired, ["encrypt-read"]),
        ([.readable, .readEncryptionRequired], ["read", "encrypt-read"]),
        (.writeEncryptionRequired, ["encrypt-write"]),
        (
            [.readable, .writeable, .readEncryptionRequired, .writeEncryptionRequired],
            ["read", "write", "encrypt-read", "encrypt-write"]
        ),
    ]

    @Test(arguments: descriptors)
    func descriptorFlags(_ permissions: AttributePermissions, _ expected: [String]) {
        let flags = BlueZGattFlags(descriptorPermissions: permissions).exportedNames
        #expect(flags == expected)
        #expect(Set(flags).isSubset(of: Self.documentedDescriptorFlags))
    }
}
