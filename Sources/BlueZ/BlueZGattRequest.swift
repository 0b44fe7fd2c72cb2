import DBus

/// A read or write request from bluetoothd to our GATT application, answered
/// exactly once (later answers are ignored; an unanswered request is answered
/// `Failed` when it is released).
package struct BlueZGattRequest: Sendable {
    private let invocation: DBusMethodInvocation
    /// The offset into the value (`offset` option; 0 when absent).
    package let offset: UInt16
    /// The negotiated ATT MTU (`mtu` option), when bluetoothd says.
    package let mtu: UInt16?
    /// The remote device's address, from the `device` option's object path.
    package let deviceAddress: String?
    /// `request`, `command` or `reliable` for writes (the `type` option).
    package let writeType: String?
    /// bluetoothd asks only whether a Prepare Write may be queued (`prepare-authorize`): the
    /// value comes again, with the others, when the central executes the writes.
    package let prepareAuthorize: Bool

    /// Reads the options dictionary (the last argument); a malformed one is
    /// answered `InvalidArguments` here and yields nil.
    init?(_ invocation: DBusMethodInvocation) {
        self.invocation = invocation
        let options: Options
        do throws(DBusError) {
            options = try Self.options((try? invocation.arguments()) ?? [])
        } catch {
            invocation.reply(error: error)
            return nil
        }
        offset = options.offset
        mtu = options.mtu
        writeType = options.writeType
        prepareAuthorize = options.prepareAuthorize
        deviceAddress = options.deviceAddress
    }

    /// What a request's options dictionary says; see the properties of the same names.
    struct Options: Hashable {
        var offset: UInt16 = 0
        var mtu: UInt16?
        var deviceAddress: String?
        var writeType: String?
        var prepareAuthorize = false
    }

    /// Reads the options dictionary, the last of a request's `arguments` (bluetoothd's input:
    /// never traps). Throws `org.bluez.Error.InvalidArguments` when there is no `a{s…}`
    /// dictionary last or its `offset` is not a `q`; other options of another type are absent.
    static func options(_ arguments: [DBusValue]) throws(DBusError) -> Options {
        guard let options = arguments.last?.stringKeyedDictionary else {
            throw DBusError(name: "org.bluez.Error.InvalidArguments", message: "malformed options")
        }
        let rawOffset = options["offset"]?.uint16Value
        if options["offset"] != nil && rawOffset == nil {
            throw DBusError(name: "org.bluez.Error.InvalidArguments", message: "offset must be q")
        }
        return Options(
            offset: rawOffset ?? 0, mtu: options["mtu"]?.uint16Value,
            deviceAddress: options["device"]?.objectPathValue.flatMap(Self.address(of:)),
            writeType: options["type"]?.stringValue, prepareAuthorize: options["prepare-authorize"]?.boolValue ?? false)
    }

    /// The method call itself, for tests that watch how long it is kept.
    package var invocationObject: AnyObject { invocation }

    /// Whether an answer was given already.
    package var isAnswered: Bool { invocation.isAnswered }

    /// Answers a read with `value`, or a write with success (pass an empty value).
    package func respond(_ value: [UInt8] = []) {
        invocation.reply(invocation.message.member?.rawValue == "ReadValue" ? [.bytes(value)] : [])
    }

    /// Answers with a BlueZ error (see ATTError's table for what the central then gets).
    package func fail(_ code: BlueZError.Code, message: String) {
        invocation.reply(error: BlueZError(code, message).dbusError)
    }

    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` → `AA:BB:CC:DD:EE:FF`; nil unless the last element
    /// is `dev_` and six pairs of hex digits, as bluetoothd names devices (`device_create`).
    static func address(of path: ObjectPath) -> String? {
        guard let last = path.rawValue.split(separator: "/").last, last.hasPrefix("dev_") else { return nil }
        let pairs = last.dropFirst(4).split(separator: "_", omittingEmptySubsequences: false)
        guard pairs.count == 6, pairs.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else { return nil }
        return pairs.joined(separator: ":")
    }
}
