/// A property of one interface of one object, for overrides.
struct PropertyKey: Sendable, Hashable {
    let path: String
    let interface: String
    let name: String
}
