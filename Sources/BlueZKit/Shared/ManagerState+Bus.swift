import BlueZ

extension ManagerState {
    /// The state to report when the bus cannot be reached (yet), or nil when the last report
    /// stands: `.resetting` once while it is tried again, `.unauthorized` when the bus refuses
    /// us, `.unsupported` for an address that can never work.
    static func whileUnreachable(_ error: BlueZError, attempt: Int) -> ManagerState? {
        switch error.code {
        case .invalidArguments: .unsupported
        case .accessDenied: .unauthorized
        default: attempt == 0 ? .resetting : nil
        }
    }
}
