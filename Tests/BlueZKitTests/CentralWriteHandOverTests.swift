import Dispatch
import Foundation
import TestSupport
import Testing

@testable import BlueZKit

/// The write loop iOS apps use, `while canSendWriteWithoutResponse { writeValue(…) }`: it stops
/// after a few writes when the manager's bus queue has not taken them yet, and hears
/// `peripheralIsReady(toSendWriteWithoutResponse:)` once it has.
@Suite(.timeLimit(.minutes(5))) struct CentralWriteHandOverTests {
    @Test(.timeLimit(.minutes(1))) func aWriteLoopStopsWhileTheBusQueueIsBusyAndHearsWhenToGoOn() async throws {
        let writes = CentralSocketTests.Writes()
        let sensor = try await CentralSocketTests.connectedSensor(writes: writes)
        let stream = try #require(sensor.remote["2A06"])
        let engine = try #require(sensor.peripheral.engine)
        // The bus queue is busy (as under a burst of events): nothing handed over is taken.
        let busy = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        engine.busQueue.async {
            started.signal()
            _ = busy.wait(timeout: .now() + 20)
        }
        started.wait()
        let readyBefore = sensor.delegate.ready
        var written = 0
        while sensor.peripheral.canSendWriteWithoutResponse && written < 100 {
            sensor.peripheral.writeValue(Data([UInt8(written)]), for: stream, type: .withoutResponse)
            written += 1
        }
        // Before: the loop ran to its bound, queueing everything at once.
        #expect(written == Peripheral.handOverLimit)
        busy.signal()
        try await waitUntil("told to go on") {
            sensor.delegate.ready > readyBefore && sensor.peripheral.canSendWriteWithoutResponse
        }
        try await waitUntil("the writes arrived") { writes.values.count == written }
        #expect(writes.values == (0..<written).map { [UInt8($0)] })
    }
}
