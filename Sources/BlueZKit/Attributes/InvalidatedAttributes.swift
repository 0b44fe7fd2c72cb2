/// The attribute objects of services a database change invalidated, held weakly: an operation on
/// one the app still holds fails with `invalidHandle`, and one the app released is forgotten
/// (``prune()``), so the set does not grow with every service change of a long connection.
/// Queue-confined, with the rest of the central engine's GATT model.
struct InvalidatedAttributes {
    private final class WeakBox {
        weak var object: AnyObject?
        init(_ object: AnyObject) { self.object = object }
    }

    private var boxes: [ObjectIdentifier: WeakBox] = [:]

    /// How many entries are kept (released ones count until the next ``prune()``).
    var count: Int { boxes.count }

    mutating func insert(_ attribute: AnyObject) {
        boxes[ObjectIdentifier(attribute)] = WeakBox(attribute)
    }

    /// Whether `attribute` itself (not a later object at the same address) was invalidated.
    func contains(_ attribute: AnyObject) -> Bool {
        boxes[ObjectIdentifier(attribute)]?.object === attribute
    }

    /// Forgets the attributes nobody holds any more.
    mutating func prune() {
        boxes = boxes.filter { $0.value.object != nil }
    }
}
