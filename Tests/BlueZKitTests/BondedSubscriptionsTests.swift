import Testing

@testable import BlueZKit

/// `BondedSubscriptions` on its own: what a bonded central's dropped link leaves remembered, the
/// race of a socket closing just before `Connected` turns false, and the wait for sockets.
@Suite(.timeLimit(.minutes(1))) struct BondedSubscriptionsTests {
    final class Token {}
    let characteristics = [Token(), Token()]
    let registration = Token()
    let central = "11:22:33:44:55:01"

    func entry(_ index: Int) -> BondedSubscriptions.Entry {
        BondedSubscriptions.Entry(
            characteristic: ObjectIdentifier(characteristics[index]), registration: ObjectIdentifier(registration))
    }

    @Test func aBondedCentralGetsBackWhatItWasSubscribedTo() {
        var table = BondedSubscriptions()
        let now = ContinuousClock.now
        table.linkDropped(address: central, bonded: true, subscribed: [entry(0), entry(1)], at: now)
        #expect(Set(table.linkReturned(address: central)) == [entry(0), entry(1)])
        // Once only: the next link starts from what is known then.
        #expect(table.linkReturned(address: central).isEmpty)
    }

    @Test func aCentralThatIsNotBondedGetsNothingBack() {
        var table = BondedSubscriptions()
        let now = ContinuousClock.now
        table.socketClosed(address: central, entry: entry(1), at: now)
        table.linkDropped(address: central, bonded: false, subscribed: [entry(0)], at: now)
        #expect(table.linkReturned(address: central).isEmpty)
    }

    @Test func aSocketClosedJustBeforeTheLinkDroppedCounts() {
        var table = BondedSubscriptions()
        let now = ContinuousClock.now
        table.socketClosed(address: central, entry: entry(0), at: now - .seconds(4))
        table.socketClosed(address: central, entry: entry(1), at: now - .seconds(2))
        table.linkDropped(address: central, bonded: true, subscribed: [], at: now)
        #expect(table.linkReturned(address: central) == [entry(1)])
    }

    @Test func aForgottenBondGetsNothingBack() {
        var table = BondedSubscriptions()
        table.linkDropped(address: central, bonded: true, subscribed: [entry(0)], at: .now)
        table.forget(address: central)
        #expect(table.linkReturned(address: central).isEmpty)
    }

    @Test func aCentralBackWithoutASocketIsWaitedForUntilItHasOne() {
        var table = BondedSubscriptions()
        let key = ObjectIdentifier(characteristics[0])
        table.returnedWithoutSocket(address: central, characteristic: key)
        table.returnedWithoutSocket(address: "11:22:33:44:55:02", characteristic: key)
        #expect(table.withoutSocket(key) == [central, "11:22:33:44:55:02"])
        table.socketOpened(address: central, characteristic: key)
        table.unsubscribed(address: "11:22:33:44:55:02", characteristic: key)
        #expect(table.withoutSocket(key).isEmpty)
        table.returnedWithoutSocket(address: central, characteristic: key)
        table.linkDropped(address: central, bonded: true, subscribed: [], at: .now)
        #expect(table.withoutSocket(key).isEmpty)
    }
}
