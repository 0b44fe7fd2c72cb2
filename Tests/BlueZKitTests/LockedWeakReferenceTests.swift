import Dispatch
import Locking
import Testing

/// The weak reference behind a lock that holds delegates (PairingAgent's): weak, and safe to set
/// and read from several threads at once (ThreadSanitizer checks the latter in Scripts/test).
@Suite(.timeLimit(.minutes(1))) struct LockedWeakReferenceTests {
    final class Object: Sendable {}

    @Test func itHoldsItsObjectWeakly() {
        let reference = LockedWeakReference<Object>()
        #expect(reference.object == nil)
        var object: Object? = Object()
        reference.object = object
        #expect(reference.object === object)
        object = nil
        #expect(reference.object == nil)
    }

    @Test func threadsSetAndReadItAtOnce() {
        let kept = Object()
        let reference = LockedWeakReference<Object>(kept)
        DispatchQueue.concurrentPerform(iterations: 1000) { index in
            if index.isMultiple(of: 2) { reference.object = kept } else { _ = reference.object }
        }
        #expect(reference.object === kept)
    }
}
