internal import DBus

extension ObjectPath {
    /// The child path `element` (a valid path element), or `self` if it is not one.
    func childOrRoot(_ element: String) -> ObjectPath {
        (try? appending(element)) ?? self
    }
}
