import Dispatch
import Locking
import Testing

/// `QueueBound`, the box an engine keeps its state in: usable on its queue, a trap elsewhere.
@Suite(.timeLimit(.minutes(1)))
struct QueueBoundTests {
    @Test func readsAndWritesOnItsQueue() {
        let queue = DispatchQueue(label: "QueueBoundTests.own")
        let bound = QueueBound([1, 2], queue: queue)
        let read = queue.sync {
            bound.value.append(3)
            bound.value[0] += 10
            return bound.value
        }
        #expect(read == [11, 2, 3])
    }

    @Test func aReadOffItsQueueTraps() async {
        await #expect(processExitsWith: .failure) {
            let bound = QueueBound(1, queue: DispatchQueue(label: "QueueBoundTests.other"))
            _ = bound.value
        }
    }

    @Test func aWriteFromAnotherQueueTraps() async {
        await #expect(processExitsWith: .failure) {
            let bound = QueueBound(1, queue: DispatchQueue(label: "QueueBoundTests.owner"))
            DispatchQueue(label: "QueueBoundTests.intruder").sync { bound.value = 2 }
        }
    }
}
