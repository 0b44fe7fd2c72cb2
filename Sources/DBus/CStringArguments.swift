#if canImport(Glibc)
    import Glibc
#endif

/// C strings for libdbus's arguments without a heap copy.
///
/// Passing a Swift `String` where C wants `const char *` makes the compiler copy it into a
/// new array for the call (`String.utf8CString`): an allocation, a copy and a release each
/// time. `withCString` lends the string's own storage (a native string keeps a NUL after its
/// bytes) or, for a small string, a copy on the stack. The message builders use these on
/// every call, signal and notification (`Scripts/benchmark-dbus --only roundtrip`).
extension Optional where Wrapped == String {
    /// Runs `body` with this string as a C string, or with nil when there is none.
    func withOptionalCString<Result>(_ body: (UnsafePointer<CChar>?) -> Result) -> Result {
        guard let string = self else { return body(nil) }
        return string.withCString { body($0) }
    }
}

extension String {
    /// Whether the string holds a NUL byte, which a C string cannot carry (libdbus would take
    /// the string as ending there, or abort on it).
    ///
    /// `strlen` over the string's own storage against its UTF-8 count: iterating `utf8` to
    /// look for the byte costs about forty instructions per character, and names and strings
    /// are checked on every message built.
    var containsNUL: Bool {
        let count = utf8.count
        return withCString { strlen($0) != count }
    }
}
