import BlueZKit
import Foundation
import UARTProfile

/// The central's transfer in L2CAP mode: writes the pattern to the channel while it reads the
/// echo back and checks it, both at once (the kernel's credits pace the writer: were the echo
/// not read, the peripheral would stop reading, and the writer would wait for good).
///
/// Uses the channel's Swift concurrency API (`write(_:)`, `read()`); Core Bluetooth's
/// Foundation streams work too.
struct ChannelTransfer: Sendable {
    /// How it went.
    struct Outcome: Sendable {
        /// The echo's verdict: `.complete` only when every byte came back intact.
        var status: EchoVerifier.Status
        /// How many bytes came back intact.
        var received: Int
        /// When the last byte was handed to the kernel, if it was.
        var allSent: ContinuousClock.Instant?
        /// What ended the channel early, if anything did.
        var error: (any Error)?
    }

    let channel: L2CAPChannel
    let pattern: TestPattern
    let bytes: Int
    /// SDUs handed to one `write`: the channel cuts the data into SDUs of its MTU.
    var sdusPerWrite = 32

    /// Sends `bytes` bytes of the pattern and checks the echo; `progress` hears the count of
    /// bytes that came back intact after every SDU. Closes the channel when it is done.
    func run(progress: @escaping @Sendable (Int) -> Void) async -> Outcome {
        async let sent = send()
        var verifier = EchoVerifier(pattern: pattern, expected: bytes)
        var failure: (any Error)?
        reading: while verifier.status == .incomplete {
            do {
                guard let sdu = try await channel.read() else { break reading }
                verifier.consume(sdu)
                progress(verifier.received)
            } catch {
                failure = error
                break reading
            }
        }
        // Done, or gone wrong: either way the writer stops (a write in progress fails).
        channel.close()
        let allSent = await sent
        return Outcome(status: verifier.status, received: verifier.received, allSent: allSent, error: failure)
    }

    /// Writes the pattern; when the last byte went, or nil if the channel ended first.
    private func send() async -> ContinuousClock.Instant? {
        var chunker = PatternChunker(pattern: pattern, total: bytes)
        while let block = chunker.next(maximumLength: channel.maximumWriteLength * sdusPerWrite) {
            do {
                try await channel.write(block)
            } catch {
                return nil
            }
        }
        return .now
    }
}
