/// The one table between Core Bluetooth's characteristic properties and
/// attribute permissions and the `Flags` strings of BlueZ's
/// `GattCharacteristic1` and `GattDescriptor1` interfaces.
///
/// What BlueZ does with the flags of an exported characteristic (bluetoothd
/// 5.66, `src/gatt-database.c`, `parse_chrc_flags` / `parse_desc_flags`):
/// - each flag adds to the declared properties *and* the value's ATT
///   permissions, and the flags are OR-ed: `"read"` declares read and permits
///   it; `"encrypt-read"` declares read and permits it only over an encrypted
///   link. Sending both still requires encryption.
/// - `"encrypt-write"` declares the *write* property as well, so a
///   characteristic with only ``CharacteristicProperties/writeWithoutResponse``
///   and ``AttributePermissions/writeEncryptionRequired`` is published with
///   write-with-response too. The alternative, dropping the encryption
///   requirement, would be a silent security downgrade.
/// - `"encrypt-notify"` / `"encrypt-indicate"` declare notify / indicate and
///   require encryption for writing the client characteristic configuration
///   descriptor, which is what Core Bluetooth's
///   ``CharacteristicProperties/notifyEncryptionRequired`` means.
/// - an empty `Flags` array makes BlueZ reject the whole application, and an
///   unknown flag too. With nothing else to say, the table answers
///   `["authorize"]`, which declares nothing and leaves the access decision
///   to our `ReadValue` / `WriteValue` handlers (they then also receive
///   prepared writes with the `prepare-authorize` option).
///
/// A property without the matching permission (read property, no
/// ``AttributePermissions/readable``) still gets its flag: BlueZ cannot
/// declare an operation it forbids, so the peripheral manager's handler
/// answers such requests with ``ATTError/Code/readNotPermitted`` /
/// ``ATTError/Code/writeNotPermitted`` itself.
///
/// For remote characteristics BlueZ reports the declared properties byte and
/// the extended properties (`src/gatt-client.c`, `chrc_props` /
/// `chrc_ext_props`); the server-only flags are read too, for tolerance.
package enum BlueZGattFlags {
    /// Every flag the tables produce or read, with the property each one
    /// declares for a remote characteristic, in the order of BlueZ's
    /// documentation (`doc/org.bluez.GattCharacteristic.rst`).
    private static let remoteTable: [(flag: String, properties: CharacteristicProperties)] = [
        ("broadcast", .broadcast),
        ("read", .read),
        ("write-without-response", .writeWithoutResponse),
        ("write", .write),
        ("notify", .notify),
        ("indicate", .indicate),
        ("authenticated-signed-writes", .authenticatedSignedWrites),
        ("extended-properties", .extendedProperties),
        ("reliable-write", .extendedProperties),
        ("writable-auxiliaries", .extendedProperties),
        ("encrypt-read", .read),
        ("encrypt-write", .write),
        ("encrypt-notify", [.notify, .notifyEncryptionRequired]),
        ("encrypt-indicate", [.indicate, .indicateEncryptionRequired]),
        ("encrypt-authenticated-read", .read),
        ("encrypt-authenticated-write", .write),
        ("encrypt-authenticated-notify", [.notify, .notifyEncryptionRequired]),
        ("encrypt-authenticated-indicate", [.indicate, .indicateEncryptionRequired]),
        ("secure-read", .read),
        ("secure-write", .write),
        ("secure-notify", [.notify, .notifyEncryptionRequired]),
        ("secure-indicate", [.indicate, .indicateEncryptionRequired]),
    ]

    /// The flag BlueZ accepts for a characteristic or descriptor that
    /// declares nothing; see the type's documentation.
    package static let emptyFallback = "authorize"

    /// The `Flags` to export for a characteristic we publish.
    ///
    /// Never empty, no duplicates, in the order of BlueZ's documentation.
    /// ``CharacteristicProperties/notifyEncryptionRequired`` implies
    /// `"notify"` (likewise for indicate), and the encryption permissions add
    /// `"encrypt-read"` / `"encrypt-write"` next to the plain flag of a
    /// read / write property; see the type's documentation for why.
    package static func bluezFlags(
        properties: CharacteristicProperties,
        permissions: AttributePermissions
    ) -> [String] {
        var flags: [String] = []
        func add(_ flag: String, if condition: Bool) {
            if condition { flags.append(flag) }
        }
        let writes = properties.contains(.write) || properties.contains(.writeWithoutResponse)
        add("broadcast", if: properties.contains(.broadcast))
        add("read", if: properties.contains(.read))
        add("write-without-response", if: properties.contains(.writeWithoutResponse))
        add("write", if: properties.contains(.write))
        add("notify", if: !properties.isDisjoint(with: [.notify, .notifyEncryptionRequired]))
        add("indicate", if: !properties.isDisjoint(with: [.indicate, .indicateEncryptionRequired]))
        add("authenticated-signed-writes", if: properties.contains(.authenticatedSignedWrites))
        add("extended-properties", if: properties.contains(.extendedProperties))
        add("encrypt-read", if: properties.contains(.read) && permissions.contains(.readEncryptionRequired))
        add("encrypt-write", if: writes && permissions.contains(.writeEncryptionRequired))
        add("encrypt-notify", if: properties.contains(.notifyEncryptionRequired))
        add("encrypt-indicate", if: properties.contains(.indicateEncryptionRequired))
        return flags.isEmpty ? [emptyFallback] : flags
    }

    /// The `Flags` to export for a descriptor we publish.
    ///
    /// `"read"` / `"write"` for ``AttributePermissions/readable`` /
    /// ``AttributePermissions/writeable``, plus `"encrypt-read"` /
    /// `"encrypt-write"` for the encryption permissions (each of which also
    /// permits the operation, encrypted). Never empty: no permissions give
    /// `["authorize"]`.
    package static func bluezDescriptorFlags(permissions: AttributePermissions) -> [String] {
        var flags: [String] = []
        if permissions.contains(.readable) { flags.append("read") }
        if permissions.contains(.writeable) { flags.append("write") }
        if permissions.contains(.readEncryptionRequired) { flags.append("encrypt-read") }
        if permissions.contains(.writeEncryptionRequired) { flags.append("encrypt-write") }
        return flags.isEmpty ? [emptyFallback] : flags
    }

    /// The properties of a remote characteristic from its BlueZ `Flags`.
    ///
    /// Unknown flags (and `"authorize"`, which declares nothing) are ignored.
    /// The extended-properties flags (`"reliable-write"`,
    /// `"writable-auxiliaries"`) give ``CharacteristicProperties/extendedProperties``;
    /// the server-side encryption variants give the plain property, and for
    /// notify / indicate also the matching `…EncryptionRequired` property.
    package static func properties(fromBlueZFlags flags: [String]) -> CharacteristicProperties {
        var properties: CharacteristicProperties = []
        for flag in flags {
            if let entry = remoteTable.first(where: { $0.flag == flag }) {
                properties.formUnion(entry.properties)
            }
        }
        return properties
    }

    /// Every flag ``properties(fromBlueZFlags:)`` understands, in the order of
    /// BlueZ's documentation.
    package static var knownFlags: [String] {
        remoteTable.map(\.flag)
    }
}
