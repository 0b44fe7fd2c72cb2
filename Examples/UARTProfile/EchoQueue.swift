public import Foundation

/// What the peripheral received and has still to echo: the chunks in the order they came.
///
/// The sender takes the front chunk and drops it only once the path took it (an
/// `updateValue` that returned false sends nothing: the same bytes are offered again when the
/// manager is ready), so nothing is lost or sent twice. Each chunk goes back whole — the
/// central's frames stay intact — unless it is longer than a notification may be, then in
/// pieces.
public struct EchoQueue: Sendable {
    private var chunks: [Data] = []
    private var head = 0

    /// An empty queue.
    public init() {}

    /// How many bytes wait.
    public private(set) var byteCount = 0

    /// Whether nothing waits.
    public var isEmpty: Bool { head == chunks.count }

    /// Adds a chunk at the back (an empty one is ignored).
    public mutating func append(_ chunk: Data) {
        guard !chunk.isEmpty else { return }
        chunks.append(chunk)
        byteCount += chunk.count
    }

    /// The front chunk, or its first `maximumLength` bytes when it is longer; nil when empty.
    public func front(maximumLength: Int) -> Data? {
        guard !isEmpty else { return nil }
        let chunk = chunks[head]
        return chunk.count <= maximumLength ? chunk : Data(chunk.prefix(max(1, maximumLength)))
    }

    /// Drops the first `length` bytes of the front chunk (the whole chunk when that is all of it).
    public mutating func removeFront(_ length: Int) {
        guard !isEmpty, length > 0 else { return }
        let chunk = chunks[head]
        let taken = min(length, chunk.count)
        byteCount -= taken
        if taken == chunk.count {
            head += 1
            if head == chunks.count || head >= 1024 {
                chunks.removeFirst(head)
                head = 0
            }
        } else {
            chunks[head] = Data(chunk.dropFirst(taken))
        }
    }
}
