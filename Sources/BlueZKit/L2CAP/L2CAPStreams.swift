import Foundation

/// The run loops a stream is scheduled in, its delegate and status: what both L2CAP streams share.
///
/// A lock type: every `var` is read and written under `lock` (not a `PosixMutex`, which would
/// have to hand Foundation's non-`Sendable` `RunLoop` and delegate in and out as `sending`); the
/// delegate is called only on the scheduled run loops, as Foundation's streams do.
private final class StreamEvents: @unchecked Sendable {
    private let lock = NSLock()
    private var status: Stream.Status = .notOpen
    private var runLoops: [(RunLoop, RunLoop.Mode)] = []
    private weak var delegateObject: (any StreamDelegate)?

    var delegate: (any StreamDelegate)? {
        get { lock.withLock { delegateObject } }
        set { lock.withLock { delegateObject = newValue } }
    }

    var currentStatus: Stream.Status { lock.withLock { status } }

    /// Moves from `notOpen` to `open`; false when the stream was opened before.
    func open() -> Bool {
        lock.withLock {
            guard status == .notOpen else { return false }
            status = .open
            return true
        }
    }

    func close() { lock.withLock { status = .closed } }

    func schedule(_ runLoop: RunLoop, _ mode: RunLoop.Mode) { lock.withLock { runLoops.append((runLoop, mode)) } }

    func remove(_ runLoop: RunLoop, _ mode: RunLoop.Mode) {
        lock.withLock { runLoops.removeAll { $0.0 === runLoop && $0.1 == mode } }
    }

    /// Calls the delegate with `event` on each scheduled run loop (none when unscheduled),
    /// through a timer: adding one wakes the run loop.
    func post(_ event: Stream.Event, to stream: Stream) {
        let (runLoops, open) = lock.withLock { (self.runLoops, status == .open) }
        guard open else { return }
        nonisolated(unsafe) let stream = stream
        for (runLoop, mode) in runLoops {
            let timer = Timer(timeInterval: 0, repeats: false) { [self] _ in
                let delegate = lock.withLock { status == .closed ? nil : delegateObject }
                delegate?.stream(stream, handle: event)
            }
            runLoop.add(timer, forMode: mode)
        }
    }
}

/// A stream held weakly by the channel's event hooks.
///
/// The invariant behind `@unchecked Sendable`: `value` is set once, before the box is shared, and
/// the hooks (on the core's queue) only call the stream's event posting, whose state is behind
/// `StreamEvents`' lock and the core's ``QueueBound`` (Foundation's streams are not `Sendable`).
private final class WeakStream<S: AnyObject>: @unchecked Sendable {
    weak var value: S?
    init(_ value: S) { self.value = value }
}

/// The ``L2CAPChannel/inputStream``: bytes of the SDUs the peer sent.
final class L2CAPInputStream: InputStream {
    private let core: L2CAPChannelCore
    private let events = StreamEvents()
    weak var sibling: L2CAPOutputStream?

    init(core: L2CAPChannelCore) {
        self.core = core
        super.init(data: Data())
    }

    override var delegate: (any StreamDelegate)? {
        get { events.delegate }
        set { events.delegate = newValue }
    }

    override var streamStatus: Stream.Status {
        let status = events.currentStatus
        guard status == .open, !core.hasBytesAvailable, let ending = core.endingNow else { return status }
        if case .peerClosed = ending { return .atEnd }
        return .error
    }

    override var streamError: (any Error)? {
        guard case .failed(let error)? = core.endingNow else { return nil }
        return error
    }

    override func open() {
        guard events.open() else { return }
        events.post(.openCompleted, to: self)
        let me = WeakStream(self)
        core.queue.async { [core] in
            core.onInput = { me.value?.inputChanged() }
            me.value?.inputChanged()
        }
    }

    private func inputChanged() {
        if core.hasBytesAvailableOnQueue {
            events.post(.hasBytesAvailable, to: self)
        } else if let ending = core.endingOnQueue {
            if case .peerClosed = ending {
                events.post(.endEncountered, to: self)
            } else {
                events.post(.errorOccurred, to: self)
            }
        }
    }

    override func close() {
        events.close()
        if sibling?.isClosed ?? true { core.close() }
    }

    var isClosed: Bool { events.currentStatus == .closed }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard events.currentStatus == .open else { return -1 }
        return core.receiveBlocking(into: buffer, count: len)
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool { false }

    override var hasBytesAvailable: Bool { core.hasBytesAvailable }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.schedule(aRunLoop, mode)
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.remove(aRunLoop, mode)
    }

}

/// The ``L2CAPChannel/outputStream``: each write is one SDU to the peer.
final class L2CAPOutputStream: OutputStream {
    private let core: L2CAPChannelCore?
    private let events = StreamEvents()
    weak var sibling: L2CAPInputStream?

    init(core: L2CAPChannelCore) {
        self.core = core
        super.init(toMemory: ())
    }

    /// Foundation's required initializer: a stream with no channel, whose writes fail.
    required init(toMemory: ()) {
        self.core = nil
        super.init(toMemory: ())
    }

    override var delegate: (any StreamDelegate)? {
        get { events.delegate }
        set { events.delegate = newValue }
    }

    override var streamStatus: Stream.Status {
        let status = events.currentStatus
        guard status == .open, core?.endingNow != nil else { return status }
        return .error
    }

    override var streamError: (any Error)? {
        guard let core else { return BluetoothError(.invalidParameters, message: "The stream has no channel.") }
        switch core.endingNow {
        case .failed(let error)?: return error
        case .peerClosed?: return BluetoothError(.peripheralDisconnected, message: "The peer closed the L2CAP channel.")
        default: return nil
        }
    }

    override func open() {
        guard events.open() else { return }
        events.post(.openCompleted, to: self)
        guard let core else { return }
        let me = WeakStream(self)
        core.queue.async { [core] in
            core.onOutput = { me.value?.outputChanged() }
            me.value?.outputChanged()
        }
    }

    private func outputChanged() {
        if core?.endingOnQueue != nil {
            events.post(.errorOccurred, to: self)
        } else {
            events.post(.hasSpaceAvailable, to: self)
        }
    }

    override func close() {
        events.close()
        if sibling?.isClosed ?? true { core?.close() }
    }

    var isClosed: Bool { events.currentStatus == .closed }

    /// Sends up to the channel's MTU as one SDU without waiting: the count sent, 0 when the
    /// channel cannot take it now (a `hasSpaceAvailable` event follows once it can), -1 once
    /// the stream is not open or the channel ended.
    override func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        guard let core, events.currentStatus == .open else { return -1 }
        return core.sendWithoutWaiting(buffer, count: len)
    }

    override var hasSpaceAvailable: Bool { core?.hasSpaceAvailable ?? false }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.schedule(aRunLoop, mode)
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.remove(aRunLoop, mode)
    }

}
