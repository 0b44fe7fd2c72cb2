/// The invariants an interleaving run checks, and a broken one with what broke it.
enum InterleavingInvariant: String, Sendable, Hashable, CaseIterable {
    case callEnds = "every async call ends, with a result or an error, once its task is cancelled"
    case releaseEnds = "no continuation or stream is left open after its manager is released"
    case advertisingAgrees =
        "isAdvertising and the services agree with what bluetoothd holds and with the app's last call"
    case ownResult = "each caller gets its own result"
    case delegateOrder = "delegate calls for one peripheral arrive in a valid order"
    case updateValueLive = "updateValue is never refused for ever while every subscribed central has room"
}

/// An invariant that did not hold, and the evidence.
struct InterleavingViolation: Sendable, Hashable, CustomStringConvertible {
    let invariant: InterleavingInvariant
    let detail: String

    var description: String { "\(invariant.rawValue)\n  \(detail)" }
}
