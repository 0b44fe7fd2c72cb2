// The harness, not the app. On iOS, UIApplicationMain runs the main run loop, which delivers
// the main queue's blocks (the manager's delegate calls: it was created with queue nil) and fires
// the app's Timer. A Linux program runs that loop itself. Standard output is line-buffered so that
// whoever reads it sees each line at once (the import is @preconcurrency for Glibc's `stdout`,
// which it re-exports: a C global that Swift 6 lets only such an import touch), and SIGTERM ends
// the program after the app's cleanup.
@preconcurrency import BlueZKit

setvbuf(stdout, nil, _IOLBF, 0)
let bleManager = BLEManager()
signal(SIGTERM, SIG_IGN)
let termination = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .main)
termination.setEventHandler {
    MainActor.assumeIsolated { bleManager.cleanup() }
    exit(0)
}
termination.resume()
RunLoop.main.run()
