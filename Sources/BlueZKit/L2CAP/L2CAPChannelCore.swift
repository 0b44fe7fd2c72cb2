import BlueZ
import Foundation
import Locking
import Synchronization

/// The engine of one ``L2CAPChannel``: reads SDUs from the kernel socket into a bounded inbox,
/// sends queued writes as credits allow, and wakes whoever waits (async callers, the streams).
///
/// `Sendable` as the compiler checks it: every mutable field is in `state`, a ``QueueBound`` that
/// checks on every access that it runs on `queue` (the socket's); `changed` guards only the
/// wake-ups of blocked stream calls (its generation is an atomic, read and bumped under it).
final class L2CAPChannelCore: Sendable {
    let queue: DispatchQueue
    let sendMTU: Int
    private let socket: BlueZL2CAPSocket
    private let state: QueueBound<State>
    /// Bumped on every change; the streams' blocking calls wait for it to move.
    private let changed = NSCondition()
    private let generation = Atomic<Int>(0)
    private let ids = PosixMutex(0)

    /// What changes, all on `queue`.
    private struct State {
        /// SDUs read and not yet taken; `inboxOffset` bytes of the first are taken already.
        var inbox: [Data] = []
        var inboxOffset = 0
        var inboxBytes = 0
        var ending: Ending?
        var readWaiters: [(id: Int, continuation: CheckedContinuation<Result<Data?, BluetoothError>, Never>)] = []
        var cancelledReads: Set<Int> = []
        var writes: [PendingWrite] = []
        var readArmed = false
        var writeArmed = false
        var onInput: (@Sendable () -> Void)?
        var onOutput: (@Sendable () -> Void)?
    }

    // The fields of `state`, under their old names (each access checks the queue).
    private var inbox: [Data] {
        get { state.value.inbox }
        _modify { yield &state.value.inbox }
    }
    private var inboxOffset: Int {
        get { state.value.inboxOffset }
        _modify { yield &state.value.inboxOffset }
    }
    private var inboxBytes: Int {
        get { state.value.inboxBytes }
        _modify { yield &state.value.inboxBytes }
    }
    private var ending: Ending? {
        get { state.value.ending }
        _modify { yield &state.value.ending }
    }
    private var readWaiters: [(id: Int, continuation: CheckedContinuation<Result<Data?, BluetoothError>, Never>)] {
        get { state.value.readWaiters }
        _modify { yield &state.value.readWaiters }
    }
    private var cancelledReads: Set<Int> {
        get { state.value.cancelledReads }
        _modify { yield &state.value.cancelledReads }
    }
    private var writes: [PendingWrite] {
        get { state.value.writes }
        _modify { yield &state.value.writes }
    }
    private var readArmed: Bool {
        get { state.value.readArmed }
        _modify { yield &state.value.readArmed }
    }
    private var writeArmed: Bool {
        get { state.value.writeArmed }
        _modify { yield &state.value.writeArmed }
    }
    /// Called on `queue` when data, room or the end arrive (the streams' event sources); set on `queue`.
    var onInput: (@Sendable () -> Void)? {
        get { state.value.onInput }
        _modify { yield &state.value.onInput }
    }
    var onOutput: (@Sendable () -> Void)? {
        get { state.value.onOutput }
        _modify { yield &state.value.onOutput }
    }

    /// The inbox stops reading the socket at this size: the kernel then withholds credits, and
    /// the peer waits.
    static let inboxLimit = 64 * 1024

    enum Ending {
        case peerClosed
        case failed(BluetoothError)
        case closedLocally
    }

    private struct PendingWrite {
        var chunks: [Data]
        var next = 0
        var continuation: CheckedContinuation<Result<Void, BluetoothError>, Never>
    }

    init(socket: BlueZL2CAPSocket) {
        self.socket = socket
        self.queue = socket.queue
        self.sendMTU = socket.sendMTU
        self.state = QueueBound(State(), queue: socket.queue)
    }

    func newID() -> Int {
        ids.withLock {
            $0 += 1
            return $0
        }
    }

    /// Starts reading (on any thread).
    func start() { queue.async { self.pumpReads() } }

    // MARK: reading

    private func pumpReads() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard ending == nil, !readArmed else { return }
        while inboxBytes < Self.inboxLimit {
            switch socket.receive() {
            case .datagram(let bytes):
                deliver(Data(bytes))
            case .wouldBlock:
                readArmed = true
                socket.whenReadable { [weak self] in
                    self?.readArmed = false
                    self?.pumpReads()
                }
                return
            case .closed(let error):
                return end(error.map { .failed(BluetoothError(l2cap: $0)) } ?? .peerClosed)
            }
        }
    }

    private func deliver(_ sdu: Data) {
        if inbox.isEmpty, !readWaiters.isEmpty {
            readWaiters.removeFirst().continuation.resume(returning: .success(sdu))
            return
        }
        inbox.append(sdu)
        inboxBytes += sdu.count
        signal()
        onInput?()
    }

    /// Hands the next SDU (or the rest of a partly read one) to `continuation`, now or when it comes.
    func read(id: Int, continuation: CheckedContinuation<Result<Data?, BluetoothError>, Never>) {
        dispatchPrecondition(condition: .onQueue(queue))
        if cancelledReads.remove(id) != nil {
            return continuation.resume(returning: .failure(BluetoothError(.operationCancelled)))
        }
        if !inbox.isEmpty {
            let first = inbox.removeFirst()
            let sdu = first.dropFirst(inboxOffset)
            inboxOffset = 0
            inboxBytes -= first.count
            continuation.resume(returning: .success(Data(sdu)))
            return pumpReads()
        }
        switch ending {
        case nil: readWaiters.append((id, continuation))
        case .peerClosed?: continuation.resume(returning: .success(nil))
        case .failed(let error)?: continuation.resume(returning: .failure(error))
        case .closedLocally?: continuation.resume(returning: .failure(Self.closedError))
        }
    }

    func cancelRead(id: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let index = readWaiters.firstIndex(where: { $0.id == id }) else {
            cancelledReads.insert(id)
            return
        }
        readWaiters.remove(at: index).continuation.resume(returning: .failure(BluetoothError(.operationCancelled)))
    }

    /// Copies up to `count` bytes into `buffer` for the input stream, waiting until there are
    /// some: the count, 0 at the peer's end, -1 after an error or ``close()``. Not on `queue`.
    func receiveBlocking(into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        guard count > 0 else { return 0 }
        while true {
            let (taken, seen): (Int?, Int) = queue.sync {
                if !inbox.isEmpty {
                    let first = inbox[0]
                    let available = first.count - inboxOffset
                    let n = min(available, count)
                    first.withUnsafeBytes { raw in
                        buffer.update(from: raw.bindMemory(to: UInt8.self).baseAddress! + inboxOffset, count: n)
                    }
                    if n == available {
                        inbox.removeFirst()
                        inboxOffset = 0
                        inboxBytes -= first.count
                        pumpReads()
                        // The last bytes before the end: the stream's delegate hears of the end now.
                        if inbox.isEmpty, ending != nil { onInput?() }
                    } else {
                        inboxOffset += n
                    }
                    return (n, 0)
                }
                switch ending {
                case nil: return (nil, currentGeneration())
                case .peerClosed?: return (0, 0)
                case .failed?, .closedLocally?: return (-1, 0)
                }
            }
            if let taken { return taken }
            wait(past: seen)
        }
    }

    /// Whether a stream read would return without waiting.
    var hasBytesAvailable: Bool { queue.sync { !inbox.isEmpty } }

    /// Whether the channel ended, and how.
    var endingNow: Ending? { queue.sync { ending } }

    /// ``hasBytesAvailable`` and ``endingNow`` for code running on `queue`.
    var hasBytesAvailableOnQueue: Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return !inbox.isEmpty
    }
    var endingOnQueue: Ending? {
        dispatchPrecondition(condition: .onQueue(queue))
        return ending
    }

    // MARK: writing

    /// Sends `data` as SDUs of at most ``sendMTU`` bytes, in order after earlier writes;
    /// `continuation` gets the outcome once the last one is with the kernel.
    func write(_ data: Data, continuation: CheckedContinuation<Result<Void, BluetoothError>, Never>) {
        dispatchPrecondition(condition: .onQueue(queue))
        if let failure = writeFailure {
            return continuation.resume(returning: .failure(failure))
        }
        let chunks = stride(from: 0, to: data.count, by: sendMTU).map {
            Data(data[data.startIndex + $0..<data.startIndex + min($0 + sendMTU, data.count)])
        }
        guard !chunks.isEmpty else { return continuation.resume(returning: .success(())) }
        writes.append(PendingWrite(chunks: chunks, continuation: continuation))
        flushWrites()
    }

    private var writeFailure: BluetoothError? {
        switch ending {
        case nil: nil
        case .peerClosed?: BluetoothError(.peripheralDisconnected, message: "The peer closed the L2CAP channel.")
        case .failed(let error)?: error
        case .closedLocally?: Self.closedError
        }
    }

    static let closedError = BluetoothError(.notConnected, message: "The L2CAP channel is closed.")

    private func flushWrites() {
        while !writes.isEmpty {
            let write = writes[0]
            switch socket.send(write.chunks[write.next]) {
            case .sent:
                writes[0].next += 1
                if writes[0].next == write.chunks.count {
                    writes.removeFirst().continuation.resume(returning: .success(()))
                }
            case .wouldBlock:
                return armWritable()
            case .failed(let error):
                return end(.failed(BluetoothError(l2cap: error)))
            }
        }
    }

    private func armWritable() {
        guard !writeArmed, ending == nil else { return }
        writeArmed = true
        socket.whenWritable { [weak self] in
            guard let self else { return }
            self.writeArmed = false
            self.flushWrites()
            self.signal()
            if self.writes.isEmpty { self.onOutput?() }
        }
    }

    /// Sends up to ``sendMTU`` bytes of `buffer` as one SDU for the output stream, without
    /// waiting: the count sent; 0 when nothing could go now (the peer withholds credits, the
    /// kernel's buffer is full, or earlier async writes are still queued), and `onOutput` then
    /// fires once the socket is writable again; -1 once the channel ended. Not on `queue`.
    ///
    /// Never waits: a peer that withholds credits for ever cannot hold the caller's thread.
    func sendWithoutWaiting(_ buffer: UnsafePointer<UInt8>, count: Int) -> Int {
        guard count > 0 else { return 0 }
        let chunk = Data(bytes: buffer, count: min(count, sendMTU))
        return queue.sync {
            guard writeFailure == nil else { return -1 }
            guard writes.isEmpty, !writeArmed else {
                armWritable()
                return 0
            }
            switch socket.send(chunk) {
            case .sent: return chunk.count
            case .wouldBlock:
                armWritable()
                return 0
            case .failed(let error):
                end(.failed(BluetoothError(l2cap: error)))
                return -1
            }
        }
    }

    /// Whether a stream write would send something now: the channel is open, no async write
    /// is queued, and the socket was not found full since it was last writable (credits are
    /// not known until a send tries).
    var hasSpaceAvailable: Bool { queue.sync { ending == nil && writes.isEmpty && !writeArmed } }

    // MARK: the end

    /// Closes the channel (the kernel disconnects it); waiting reads and writes fail. On any thread.
    func close() { queue.async { self.end(.closedLocally) } }

    private func end(_ reason: Ending) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard ending == nil else { return }
        ending = reason
        socket.close()
        let waiters = readWaiters
        readWaiters = []
        let pending = writes
        writes = []
        for waiter in waiters {
            switch reason {
            case .peerClosed: waiter.continuation.resume(returning: .success(nil))
            case .failed(let error): waiter.continuation.resume(returning: .failure(error))
            case .closedLocally: waiter.continuation.resume(returning: .failure(Self.closedError))
            }
        }
        let failure = writeFailure ?? Self.closedError
        for write in pending { write.continuation.resume(returning: .failure(failure)) }
        signal()
        onInput?()
        onOutput?()
    }

    // MARK: waking blocked stream calls

    private func currentGeneration() -> Int {
        changed.lock()
        defer { changed.unlock() }
        return generation.load(ordering: .relaxed)
    }

    private func signal() {
        changed.lock()
        generation.add(1, ordering: .relaxed)
        changed.broadcast()
        changed.unlock()
    }

    private func wait(past seen: Int) {
        changed.lock()
        while generation.load(ordering: .relaxed) == seen { changed.wait() }
        changed.unlock()
    }
}
