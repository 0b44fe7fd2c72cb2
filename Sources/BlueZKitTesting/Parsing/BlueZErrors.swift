internal import DBus

/// The error replies bluetoothd 5.66 sends, with its exact names and messages (`src/error.c`).
enum BlueZErrors {
    static let prefix = "org.bluez.Error."

    static func make(_ name: String, _ message: String) -> DBusError {
        DBusError(name: prefix + name, message: message)
    }

    /// `btd_error_invalid_args`.
    static func invalidArguments(_ message: String = "Invalid arguments in method call") -> DBusError {
        make("InvalidArguments", message)
    }
    /// `btd_error_busy`: a second session or request where one is running.
    static var busy: DBusError { make("InProgress", "Operation already in progress") }
    /// `btd_error_in_progress`.
    static var inProgress: DBusError { make("InProgress", "In Progress") }
    static var alreadyExists: DBusError { make("AlreadyExists", "Already Exists") }
    static var notSupported: DBusError { make("NotSupported", "Operation is not supported") }
    static var notConnected: DBusError { make("NotConnected", "Not Connected") }
    static var doesNotExist: DBusError { make("DoesNotExist", "Does Not Exist") }
    static var notAuthorized: DBusError { make("NotAuthorized", "Operation Not Authorized") }
    static var notReady: DBusError { make("NotReady", "Resource Not Ready") }
    static func notPermitted(_ message: String) -> DBusError { make("NotPermitted", message) }
    static func failed(_ message: String) -> DBusError { make("Failed", message) }

    /// What a remote GATT operation that failed with an ATT error code turns into (`create_gatt_dbus_error`).
    static func gatt(_ code: UInt8) -> DBusError {
        switch code {
        case 0x02: return notPermitted("Read not permitted")
        case 0x03: return notPermitted("Write not permitted")
        case 0x05, 0x0f, 0x0c: return notPermitted("Not paired")
        case 0x07: return invalidArguments("Invalid offset")
        case 0x0d: return invalidArguments("Invalid Length")
        case 0x08: return notAuthorized
        case 0x06: return notSupported
        case 0x00: return failed("Operation failed")
        default:
            let digits = String(code, radix: 16)
            return failed("Operation failed with ATT error: 0x" + (digits.count < 2 ? "0" : "") + digits)
        }
    }

    // MARK: Generic D-Bus errors, worded as libdbus and gdbus word them

    static func unknownObject(_ path: String) -> DBusError {
        DBusError(.unknownObject, "No such object path '\(path)'")
    }

    static func unknownMethod(member: String, signature: String, interface: String) -> DBusError {
        DBusError(
            .unknownMethod,
            "Method \"\(member)\" with signature \"\(signature)\" on interface \"\(interface)\" doesn't exist")
    }

    static func noSuchInterface(_ name: String) -> DBusError {
        DBusError(.invalidArgs, "No such interface '\(name)'")
    }
}
