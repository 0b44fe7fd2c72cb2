#if canImport(Glibc)
    import Glibc
#endif

/// The current owner of a well-known bus name, kept by the connection's name tracking
/// (`DBusConnection.TrackedName`) and read by the signal router's entries whose rule names that
/// sender, as a C string for libdbus's comparison: matching a signal needs no lookup.
///
/// The invariant behind `@unchecked Sendable`: touched only on the connection's queue.
final class CurrentOwner: @unchecked Sendable {
    /// nil while the name has no owner (or it is not known yet).
    var name: BusName? {
        didSet {
            free(cName)
            cName = name.map { strdup($0.rawValue) }
        }
    }
    /// `name` as a C string.
    private(set) var cName: UnsafeMutablePointer<CChar>?

    init() {}

    deinit { free(cName) }
}
