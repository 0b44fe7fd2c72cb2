#if canImport(Glibc)
    import Glibc
#endif

/// The library's log lines, on standard error.
///
/// Warnings (dropped malformed input, failed emissions) are printed unless
/// `BLUEZKIT_LOG=quiet`; debug lines only with `BLUEZKIT_LOG=debug`.
package enum DBusLog {
    package enum Level: Int, Sendable { case debug, warning, quiet }

    package static let level: Level = {
        guard let raw = getenv("BLUEZKIT_LOG") else { return .warning }
        switch String(cString: raw) {
        case "debug": return .debug
        case "quiet", "none", "off": return .quiet
        default: return .warning
        }
    }()

    package static func warning(_ text: @autoclosure () -> String) {
        guard level.rawValue <= Level.warning.rawValue else { return }
        write("bluezkit: warning: " + text())
    }

    package static func debug(_ text: @autoclosure () -> String) {
        guard level == .debug else { return }
        write("bluezkit: " + text())
    }

    private static func write(_ line: String) {
        let text = line.hasSuffix("\n") ? line : line + "\n"
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
