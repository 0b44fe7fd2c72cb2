import Dispatch

/// Arms a dispatch source to fire once: the first event cancels it, then calls the handler.
///
/// The sockets here (an L2CAP channel's, `AcquireWrite`'s, a per-central notify link) wait for
/// "readable" or "writable" one wait at a time, each with a source made for it. The event
/// handler holds the source until it cancels it, so nothing else need keep it alive; a source
/// cancelled before it fired never calls `fired`. `cancelled` runs once the source is cancelled
/// (either way): libdispatch's rule is that the descriptor stays open until then, so it is where
/// a socket lets go of whatever keeps its descriptor open.
enum OneShotSource {
    /// Sets the handlers of `source` (on its queue) and resumes it.
    static func arm(
        _ source: any DispatchSourceProtocol, whenCancelled cancelled: @escaping @Sendable () -> Void,
        fired: @escaping @Sendable () -> Void
    ) {
        source.setCancelHandler(handler: cancelled)
        source.setEventHandler {
            guard !source.isCancelled else { return }
            source.cancel()
            fired()
        }
        source.resume()
    }
}
