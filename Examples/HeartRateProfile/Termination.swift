public import Dispatch
import Foundation

/// Stopping an example cleanly on SIGINT (Ctrl-C) and SIGTERM (systemd, kill).
public enum Termination {
    /// Calls `stop` on the main queue when SIGINT or SIGTERM arrives; `stop` is given a
    /// closure that exits with status 0 once the program has tidied up.
    ///
    /// Returns the signal sources: keep them alive for as long as the program runs.
    public static func onSignal(_ stop: @escaping @Sendable (_ exitNow: @escaping @Sendable () -> Void) -> Void)
        -> [any DispatchSourceSignal]
    {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler { stop { exit(0) } }
            source.resume()
            return source
        }
    }
}
