/// The `Flags` of bluetoothd's `GattCharacteristic1` and `GattDescriptor1` interfaces, typed:
/// the layer above says which flags it means and never spells one.
///
/// ``table`` is the one place the strings live, in the order of BlueZ's documentation
/// (`doc/org.bluez.GattCharacteristic.rst`, `doc/org.bluez.GattDescriptor.rst`); reading
/// (``init(names:)``) and writing (``names``, ``exportedNames``) both go through it.
///
/// What bluetoothd does with the flags of an exported attribute (5.66, `src/gatt-database.c`,
/// `parse_chrc_flags` / `parse_desc_flags`): each flag adds to the declared properties *and*
/// to the value's ATT permissions, OR-ed; `encryptWrite` declares the write property too;
/// `encryptNotify` / `encryptIndicate` declare notify / indicate and require encryption to
/// write the client characteristic configuration descriptor. An empty or unknown flag makes
/// bluetoothd reject the whole application, hence ``exportedNames``. For a remote
/// characteristic bluetoothd reports the declared properties and extended properties
/// (`src/gatt-client.c`, `chrc_props` / `chrc_ext_props`).
package struct BlueZGattFlags: OptionSet, Sendable, Hashable {
    package let rawValue: UInt32

    /// A set of flags from their bits.
    package init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `"broadcast"`.
    package static let broadcast = Self(rawValue: 1 << 0)
    /// `"read"`.
    package static let read = Self(rawValue: 1 << 1)
    /// `"write-without-response"`.
    package static let writeWithoutResponse = Self(rawValue: 1 << 2)
    /// `"write"`.
    package static let write = Self(rawValue: 1 << 3)
    /// `"notify"`.
    package static let notify = Self(rawValue: 1 << 4)
    /// `"indicate"`.
    package static let indicate = Self(rawValue: 1 << 5)
    /// `"authenticated-signed-writes"`.
    package static let authenticatedSignedWrites = Self(rawValue: 1 << 6)
    /// `"extended-properties"`.
    package static let extendedProperties = Self(rawValue: 1 << 7)
    /// `"reliable-write"` (an extended property).
    package static let reliableWrite = Self(rawValue: 1 << 8)
    /// `"writable-auxiliaries"` (an extended property).
    package static let writableAuxiliaries = Self(rawValue: 1 << 9)
    /// `"encrypt-read"`.
    package static let encryptRead = Self(rawValue: 1 << 10)
    /// `"encrypt-write"`.
    package static let encryptWrite = Self(rawValue: 1 << 11)
    /// `"encrypt-notify"`.
    package static let encryptNotify = Self(rawValue: 1 << 12)
    /// `"encrypt-indicate"`.
    package static let encryptIndicate = Self(rawValue: 1 << 13)
    /// `"encrypt-authenticated-read"`.
    package static let encryptAuthenticatedRead = Self(rawValue: 1 << 14)
    /// `"encrypt-authenticated-write"`.
    package static let encryptAuthenticatedWrite = Self(rawValue: 1 << 15)
    /// `"encrypt-authenticated-notify"`.
    package static let encryptAuthenticatedNotify = Self(rawValue: 1 << 16)
    /// `"encrypt-authenticated-indicate"`.
    package static let encryptAuthenticatedIndicate = Self(rawValue: 1 << 17)
    /// `"secure-read"`.
    package static let secureRead = Self(rawValue: 1 << 18)
    /// `"secure-write"`.
    package static let secureWrite = Self(rawValue: 1 << 19)
    /// `"secure-notify"`.
    package static let secureNotify = Self(rawValue: 1 << 20)
    /// `"secure-indicate"`.
    package static let secureIndicate = Self(rawValue: 1 << 21)
    /// `"authorize"`: declares nothing; bluetoothd asks our `ReadValue` / `WriteValue` handlers
    /// (and passes prepared writes with the `prepare-authorize` option).
    package static let authorize = Self(rawValue: 1 << 22)

    /// Every flag with its string, in the order of BlueZ's documentation: the one table.
    package static let table: [(flag: Self, name: String)] = [
        (.broadcast, "broadcast"), (.read, "read"), (.writeWithoutResponse, "write-without-response"),
        (.write, "write"), (.notify, "notify"), (.indicate, "indicate"),
        (.authenticatedSignedWrites, "authenticated-signed-writes"), (.extendedProperties, "extended-properties"),
        (.reliableWrite, "reliable-write"), (.writableAuxiliaries, "writable-auxiliaries"),
        (.encryptRead, "encrypt-read"), (.encryptWrite, "encrypt-write"), (.encryptNotify, "encrypt-notify"),
        (.encryptIndicate, "encrypt-indicate"), (.encryptAuthenticatedRead, "encrypt-authenticated-read"),
        (.encryptAuthenticatedWrite, "encrypt-authenticated-write"),
        (.encryptAuthenticatedNotify, "encrypt-authenticated-notify"),
        (.encryptAuthenticatedIndicate, "encrypt-authenticated-indicate"), (.secureRead, "secure-read"),
        (.secureWrite, "secure-write"), (.secureNotify, "secure-notify"), (.secureIndicate, "secure-indicate"),
        (.authorize, "authorize"),
    ]

    /// The flags that let bluetoothd indicate a characteristic (`parse_chrc_flags`).
    package static let indicating: Self = [
        .indicate, .encryptIndicate, .encryptAuthenticatedIndicate, .secureIndicate,
    ]

    /// The flags bluetoothd reported, as strings; unknown strings (bluetoothd's input is not
    /// trusted, and a newer one may know more) are ignored. Case matters, as in bluetoothd.
    package init(names: [String]) {
        self = []
        for name in names {
            if let entry = Self.table.first(where: { $0.name == name }) { insert(entry.flag) }
        }
    }

    /// The strings of these flags, in the order of BlueZ's documentation, no duplicates.
    package var names: [String] {
        Self.table.filter { contains($0.flag) }.map(\.name)
    }

    /// The `Flags` to export for an attribute we publish: ``names``, or `["authorize"]` when
    /// there are none, since bluetoothd rejects an application with an empty `Flags` array.
    package var exportedNames: [String] {
        isEmpty ? Self.authorize.names : names
    }
}
