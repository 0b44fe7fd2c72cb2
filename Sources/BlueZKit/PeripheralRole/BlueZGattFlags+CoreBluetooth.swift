package import BlueZ

/// The one mapping between Core Bluetooth's characteristic properties and attribute
/// permissions and BlueZ's GATT flags (``BlueZGattFlags``, whose strings the BlueZ layer owns).
///
/// What BlueZ does with the flags of an exported characteristic (bluetoothd
/// 5.66, `src/gatt-database.c`, `parse_chrc_flags` / `parse_desc_flags`):
/// - each flag adds to the declared properties *and* the value's ATT
///   permissions, and the flags are OR-ed: `read` declares read and permits
///   it; `encryptRead` declares read and permits it only over an encrypted
///   link. Sending both still requires encryption.
/// - `encryptWrite` declares the *write* property as well, so a
///   characteristic with only ``CharacteristicProperties/writeWithoutResponse``
///   and ``AttributePermissions/writeEncryptionRequired`` is published with
///   write-with-response too. The alternative, dropping the encryption
///   requirement, would be a silent security downgrade.
/// - `encryptNotify` / `encryptIndicate` declare notify / indicate and
///   require encryption for writing the client characteristic configuration
///   descriptor, which is what Core Bluetooth's
///   ``CharacteristicProperties/notifyEncryptionRequired`` means.
/// - with nothing to declare, the flags are empty and the BlueZ layer exports
///   `authorize` (``BlueZGattFlags/exportedNames``), which declares nothing and
///   leaves the access decision to our `ReadValue` / `WriteValue` handlers.
///
/// A property without the matching permission (read property, no
/// ``AttributePermissions/readable``) still gets its flag: BlueZ cannot
/// declare an operation it forbids, so the peripheral manager's handler
/// answers such requests with ``ATTError/Code/readNotPermitted`` /
/// ``ATTError/Code/writeNotPermitted`` itself.
extension BlueZGattFlags {
    /// The flags to export for a characteristic we publish.
    ///
    /// ``CharacteristicProperties/notifyEncryptionRequired`` implies `notify`
    /// (likewise for indicate), and the encryption permissions add
    /// `encryptRead` / `encryptWrite` next to the plain flag of a read / write
    /// property; see the extension's documentation for why.
    package init(properties: CharacteristicProperties, permissions: AttributePermissions) {
        self = []
        func add(_ flag: BlueZGattFlags, if condition: Bool) {
            if condition { insert(flag) }
        }
        let writes = properties.contains(.write) || properties.contains(.writeWithoutResponse)
        add(.broadcast, if: properties.contains(.broadcast))
        add(.read, if: properties.contains(.read))
        add(.writeWithoutResponse, if: properties.contains(.writeWithoutResponse))
        add(.write, if: properties.contains(.write))
        add(.notify, if: !properties.isDisjoint(with: [.notify, .notifyEncryptionRequired]))
        add(.indicate, if: !properties.isDisjoint(with: [.indicate, .indicateEncryptionRequired]))
        add(.authenticatedSignedWrites, if: properties.contains(.authenticatedSignedWrites))
        add(.extendedProperties, if: properties.contains(.extendedProperties))
        add(.encryptRead, if: properties.contains(.read) && permissions.contains(.readEncryptionRequired))
        add(.encryptWrite, if: writes && permissions.contains(.writeEncryptionRequired))
        add(.encryptNotify, if: properties.contains(.notifyEncryptionRequired))
        add(.encryptIndicate, if: properties.contains(.indicateEncryptionRequired))
    }

    /// The flags to export for a descriptor we publish.
    ///
    /// `read` / `write` for ``AttributePermissions/readable`` /
    /// ``AttributePermissions/writeable``, plus `encryptRead` / `encryptWrite`
    /// for the encryption permissions (each of which also permits the
    /// operation, encrypted).
    package init(descriptorPermissions permissions: AttributePermissions) {
        self = []
        if permissions.contains(.readable) { insert(.read) }
        if permissions.contains(.writeable) { insert(.write) }
        if permissions.contains(.readEncryptionRequired) { insert(.encryptRead) }
        if permissions.contains(.writeEncryptionRequired) { insert(.encryptWrite) }
    }

    /// The property each flag declares for a remote characteristic. The
    /// extended-properties flags give ``CharacteristicProperties/extendedProperties``;
    /// the server-side encryption variants give the plain property, and for
    /// notify / indicate also the matching `…EncryptionRequired` property.
    /// `authorize` declares nothing.
    fileprivate static let declaredProperties: [(flag: BlueZGattFlags, properties: CharacteristicProperties)] = [
        (.broadcast, .broadcast),
        (.read, .read),
        (.writeWithoutResponse, .writeWithoutResponse),
        (.write, .write),
        (.notify, .notify),
        (.indicate, .indicate),
        (.authenticatedSignedWrites, .authenticatedSignedWrites),
        (.extendedProperties, .extendedProperties),
        (.reliableWrite, .extendedProperties),
        (.writableAuxiliaries, .extendedProperties),
        (.encryptRead, .read),
        (.encryptWrite, .write),
        (.encryptNotify, [.notify, .notifyEncryptionRequired]),
        (.encryptIndicate, [.indicate, .indicateEncryptionRequired]),
        (.encryptAuthenticatedRead, .read),
        (.encryptAuthenticatedWrite, .write),
        (.encryptAuthenticatedNotify, [.notify, .notifyEncryptionRequired]),
        (.encryptAuthenticatedIndicate, [.indicate, .indicateEncryptionRequired]),
        (.secureRead, .read),
        (.secureWrite, .write),
        (.secureNotify, [.notify, .notifyEncryptionRequired]),
        (.secureIndicate, [.indicate, .indicateEncryptionRequired]),
    ]
}

extension CharacteristicProperties {
    /// The properties of a remote characteristic from the GATT flags BlueZ reports for it.
    ///
    /// See ``BlueZGattFlags``'s mapping for what each flag declares; `authorize` declares nothing.
    package init(bluez flags: BlueZGattFlags) {
        self = []
        for entry in BlueZGattFlags.declaredProperties where flags.contains(entry.flag) {
            formUnion(entry.properties)
        }
    }
}
