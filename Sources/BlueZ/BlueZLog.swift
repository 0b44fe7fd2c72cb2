import DBus

/// The library's log lines on standard error, for the layer above (the D-Bus layer's log:
/// `BLUEZKIT_LOG=quiet` silences warnings, `BLUEZKIT_LOG=debug` adds debug lines).
package enum BlueZLog {
    /// A warning line, unless `BLUEZKIT_LOG=quiet`.
    package static func warning(_ text: @autoclosure () -> String) { DBusLog.warning(text()) }

    /// A debug line, only with `BLUEZKIT_LOG=debug`.
    package static func debug(_ text: @autoclosure () -> String) { DBusLog.debug(text()) }
}
