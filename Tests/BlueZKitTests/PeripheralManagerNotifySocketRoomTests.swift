import BlueZKitTesting
import Dispatch
import Foundation
import TestSupport
import Testing

@testable import BlueZ
@testable import BlueZKit

#if canImport(Glibc)
    import Glibc
#endif

/// bluetoothd ≥ 5.79 (a notify socket per central): a central whose socket was full when it went
/// away no longer holds back `updateValue` to the others. Its socket is handed over as bluetoothd
/// hands one (`AcquireNotify`), with nobody reading the other end, beside a simulated central
/// that reads its own.
@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerNotifySocketRoomTests {
    typealias PerCentral = PeripheralManagerPerCentralTests

    /// A socket for a central at `address`, opened as bluetoothd opens one for a subscription;
    /// the other end (returned) is never read, so the socket fills up.
    static func stalledSocket(
        _ manager: PeripheralManager, _ characteristic: MutableCharacteristic, address: String
    ) throws -> (BlueZNotifyLink, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw POSIXError(.EMFILE) }
        let sockets = manager.engine.notifySockets(for: characteristic)
        let link = BlueZNotifyLink(
            fd: fds[0], deviceAddress: address, mtu: 185, queue: manager.engine.busQueue,
            onConfirm: sockets.confirmed, onClose: sockets.closed)
        manager.engine.busQueue.sync { sockets.opened(link) }
        return (link, fds[1])
    }

    /// Sends until `updateValue` refuses (the stalled socket is full).
    static func fill(_ manager: PeripheralManager, _ characteristic: MutableCharacteristic) throws {
        var sent = 0
        while manager.updateValue(Data(repeating: 0x55, count: 20), for: characteristic, onSubscribedCentrals: nil) {
            sent += 1
            try #require(sent < 100_000, "the stalled socket never filled up")
        }
    }

    @Test func aFullCentralWhoseLinkEndedHoldsNoOneBack() async throws {
        let (bluez, manager, delegate, characteristic) = try await PerCentral.publish([.notify])
        defer { bluez.stop() }
        let reader = try bluez.addCentral(address: "11:22:33:44:55:01")
        #expect(reader.connect())
        var (_, values) = try await PerCentral.subscribe(reader, delegate)
        let (_, peer) = try Self.stalledSocket(manager, characteristic, address: "11:22:33:44:55:02")
        defer { close(peer) }
        try await waitUntil("both subscribed") { delegate.subscribed.withLock { $0.count } == 2 }
        try Self.fill(manager, characteristic)
        let readyBefore = delegate.ready.withLock { $0 }

        // The stalled central's link ends (bluetoothd says Connected false): its socket is closed.
        manager.engine.busQueue.sync {
            manager.engine.centralLinkChanged(address: "11:22:33:44:55:02", connected: false, bonded: false)
        }
        try await waitUntil("told it may send again") { delegate.ready.withLock { $0 } > readyBefore }
        #expect(manager.updateValue(Data([0x01, 0x02]), for: characteristic, onSubscribedCentrals: nil))
        while let value = await values.next(), value != [0x01, 0x02] {}
    }

    @Test func aFullSocketReplacedByANewOneHoldsNoOneBack() async throws {
        let (bluez, manager, delegate, characteristic) = try await PerCentral.publish([.notify])
        defer { bluez.stop() }
        let address = "11:22:33:44:55:03"
        let (_, stalled) = try Self.stalledSocket(manager, characteristic, address: address)
        defer { close(stalled) }
        try await waitUntil("subscribed") { delegate.subscribed.withLock { $0.count } == 1 }
        try Self.fill(manager, characteristic)
        let readyBefore = delegate.ready.withLock { $0 }

        // The central subscribes again before the old socket's end was seen: a new one replaces it.
        let (_, fresh) = try Self.stalledSocket(manager, characteristic, address: address)
        defer { close(fresh) }
        try await waitUntil("told it may send again") { delegate.ready.withLock { $0 } > readyBefore }
        #expect(manager.updateValue(Data([0x01, 0x02]), for: characteristic, onSubscribedCentrals: nil))
    }
}
