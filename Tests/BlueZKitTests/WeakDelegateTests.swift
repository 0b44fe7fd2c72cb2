import Dispatch
import Locking
import Testing

/// `WeakDelegate`, the lock around a manager's or peripheral's delegate: weak, and safe to use
/// from several threads at once.
@Suite(.timeLimit(.minutes(1)))
struct WeakDelegateTests {
    final class Delegate: Sendable {}
    struct Holder {
        weak var object: Delegate?
    }

    @Test func holdsItsDelegateWeakly() {
        let reference = WeakDelegate(Holder())
        var delegate: Delegate? = Delegate()
        reference.value = Holder(object: delegate)
        #expect(reference.value.object === delegate)
        delegate = nil
        #expect(reference.value.object == nil)
    }

    @Test func isReadAndWrittenFromManyThreads() {
        let delegate = Delegate()
        let reference = WeakDelegate(Holder())
        DispatchQueue.concurrentPerform(iterations: 1000) { index in
            if index.isMultiple(of: 2) {
                reference.value = Holder(object: index.isMultiple(of: 4) ? delegate : nil)
            } else {
                let object = reference.value.object
                #expect(object == nil || object === delegate)
            }
        }
        withExtendedLifetime(delegate) {}
    }
}
