/// An injected fault waiting for its method.
struct FaultRule: Sendable {
    let method: SimulatedMethod
    /// Only calls to this object path, or any when nil.
    let path: String?
    let fault: SimulatedFault
    var remaining: Int
}
