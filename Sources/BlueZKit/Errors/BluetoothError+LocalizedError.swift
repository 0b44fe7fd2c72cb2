public import Foundation

// Core Bluetooth's errors are NSErrors whose `localizedDescription` says what went wrong; code
// that logs `error.localizedDescription` gets the message here too.

extension BluetoothError: LocalizedError {
    /// The ``message``, which Foundation's `localizedDescription` returns.
    public var errorDescription: String? { message }
}

extension ATTError: LocalizedError {
    /// The ``message``, which Foundation's `localizedDescription` returns.
    public var errorDescription: String? { message }
}
