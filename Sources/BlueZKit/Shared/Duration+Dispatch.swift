import Dispatch

extension Duration {
    /// The duration for Dispatch, rounded down to whole milliseconds.
    var dispatchInterval: DispatchTimeInterval {
        .milliseconds(Int(components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000))
    }
}
