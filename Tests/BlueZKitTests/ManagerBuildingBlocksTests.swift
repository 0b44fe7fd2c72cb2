import BlueZ
import Locking
import Testing

@testable import BlueZKit

/// The pieces both managers are built from: one reading of the adapter's status, one serial chain.
@Suite(.timeLimit(.minutes(5))) struct AdapterPresenceTests {
    @Test func bluetoothdMissingIsUnsupportedUntilItWasSeenThenResetting() {
        var presence = AdapterPresence()
        #expect(presence.update(.serviceAbsent) == .init(state: .unsupported, bluetoothdAppeared: false))
        #expect(
            presence.update(.present(address: "00:AA:01:00:00:00", powered: false))
                == .init(state: .poweredOff, bluetoothdAppeared: true))
        #expect(presence.adapterAddress == "00:AA:01:00:00:00")
        #expect(
            presence.update(.present(address: "00:AA:01:00:00:00", powered: true))
                == .init(state: .poweredOn, bluetoothdAppeared: false))
        // bluetoothd restarts: resetting, then it appears again (the agent is registered again).
        #expect(presence.update(.serviceAbsent) == .init(state: .resetting, bluetoothdAppeared: false))
        #expect(
            presence.update(.present(address: "00:AA:01:00:00:00", powered: true))
                == .init(state: .poweredOn, bluetoothdAppeared: true))
    }

    @Test func noAdapterCountsAsSeenAndAccessDeniedAsAbsent() {
        var presence = AdapterPresence()
        #expect(presence.update(.noAdapter) == .init(state: .unsupported, bluetoothdAppeared: true))
        #expect(presence.update(.serviceAbsent) == .init(state: .resetting, bluetoothdAppeared: false))
        #expect(presence.update(.accessDenied) == .init(state: .unauthorized, bluetoothdAppeared: false))
        #expect(presence.update(.noAdapter) == .init(state: .unsupported, bluetoothdAppeared: true))
        #expect(presence.adapterAddress == "")
    }
}

@Suite(.timeLimit(.minutes(5))) struct SerialTaskChainTests {
    @Test func operationsRunOneAfterAnotherInOrder() async {
        let chain = SerialTaskChain()
        let log = PosixMutex<(running: Int, overlapped: Bool, order: [Int])>((0, false, []))
        await confirmation(expectedCount: 50) { ran in
            for index in 0..<50 {
                chain.enqueue {
                    log.withLock {
                        $0.running += 1
                        if $0.running > 1 { $0.overlapped = true }
                    }
                    // A suspension point inside: the next operation must still wait for this one.
                    await Task.yield()
                    log.withLock {
                        $0.order.append(index)
                        $0.running -= 1
                    }
                    ran()
                }
            }
            // Wait for the last one through the chain itself.
            await withCheckedContinuation { done in chain.enqueue { done.resume() } }
        }
        let (_, overlapped, order) = log.withLock { $0 }
        #expect(!overlapped)
        #expect(order == Array(0..<50))
    }
}
