import BlueZ
import Dispatch
public import Foundation

/// Sending values to subscribed centrals, with back-pressure (the work is the engine's:
/// `PeripheralEngine+Subscriptions.swift`).
extension PeripheralManager {
    /// More queued than this and ``updateValue(_:for:onSubscribedCentrals:)`` says "not now".
    static let backlogLimit = (queuedMessages: 64, outgoingBytes: 64 * 1024)

    /// The longest value an attribute holds, so the longest one a notification or indication
    /// carries (ATT's 512 bytes; bluetoothd would cut a longer one).
    static let maximumValueLength = 512

    /// Sends `value` to the centrals subscribed to `characteristic` (`PropertiesChanged` on its
    /// `Value`; bluetoothd notifies or indicates each subscriber, as the characteristic's flags say).
    ///
    /// Returns false, sending nothing, when the value cannot be queued now: the bus has not taken
    /// what was sent before (more than 64 signals or 64 KiB waiting), the characteristic is not
    /// published, or the manager has no connection yet. After a false for back-pressure, every
    /// update returns false until the delegate's
    /// ``PeripheralManagerDelegate/peripheralManagerIsReady(toUpdateSubscribers:)`` (called on
    /// `queue` once half the backlog is gone); send the value again then.
    ///
    /// Indications are confirmed: for a characteristic whose properties include
    /// ``CharacteristicProperties/indicate`` but not ``CharacteristicProperties/notify`` (so
    /// every subscriber gets indications), a value that was sent waits for one confirmation from
    /// each subscribed central (bluetoothd calls `Confirm()` for each). Until they all came,
    /// further updates of that characteristic return false; when the last one arrives, the
    /// delegate gets `peripheralManagerIsReady(toUpdateSubscribers:)` once, if an update was
    /// refused meanwhile, and updates return false until it did. bluetoothd does not say which
    /// central confirmed, so a central whose link drops, or the last subscriber leaving, is not
    /// waited for any more, and after 30 seconds (ATT's transaction timeout) nobody is.
    /// A characteristic that can notify is not paced this way.
    ///
    /// A value longer than 512 bytes, or than the ``Central/maximumUpdateValueLength`` of a
    /// central it goes to (those in `centrals` that are subscribed, or all subscribers when
    /// `centrals` is nil), is refused, not cut: the method returns false, sends nothing and logs
    /// a warning, and no `peripheralManagerIsReady(toUpdateSubscribers:)` follows (it is not
    /// back-pressure; send shorter values). Only centrals whose ATT MTU bluetoothd reported (with
    /// a read or write request) are checked: for the others the length is a guess of 20, and
    /// bluetoothd cuts a value to the MTU of their link.
    ///
    /// While the system bus is away (the state is `.resetting`) nothing can be sent: the method
    /// returns false, and the delegate hears the state come back instead of "ready".
    ///
    /// On bluetoothd 5.66, BlueZ sends the value to every subscriber of the characteristic:
    /// `centrals` (Core Bluetooth's per-central selection) is honoured only as far as nil or a list
    /// that holds at least one subscriber sending to all; a list with no subscriber in it sends
    /// nothing and returns true.
    ///
    /// Where bluetoothd gives each subscribed central a socket of its own (5.79 and later), the
    /// value is written to the sockets of the centrals in `centrals` that are subscribed (all
    /// subscribers when nil), and reaches those only. Back-pressure is then per central: when the
    /// socket of one of them is full, nothing is sent, false is returned, and the delegate hears
    /// `peripheralManagerIsReady(toUpdateSubscribers:)` once they all have room. Once bluetoothd
    /// has written a confirmation to a socket (5.80 and later), an indication waits for the
    /// confirmation of each central it went to, and an update that goes to a central still to
    /// confirm returns false until the delegate heard "ready"; the bus backlog is not involved.
    ///
    /// A bonded central that came back subscribed (see
    /// ``PeripheralManagerDelegate/peripheralManager(_:central:didSubscribeTo:)-(_,_,Characteristic)``)
    /// has no socket there: bluetoothd closed it with the link and does not open it again. Until it
    /// has one, a value that goes to it is sent as `PropertiesChanged`, which bluetoothd delivers to
    /// every device whose CCC is set: the sockets are skipped for that value (so nobody gets it
    /// twice), `centrals` is honoured as on 5.66, and back-pressure is the bus backlog's.
    @discardableResult
    public func updateValue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?
    )
        -> Bool
    {
        guard value.count <= Self.maximumValueLength else {
            BlueZLog.warning(
                "updateValue: \(value.count) bytes for \(characteristic.uuid) not sent: "
                    + "an attribute value holds at most \(Self.maximumValueLength)")
            return false
        }
        return engine.run {
            engine.updateValueOnBusQueue(value, for: characteristic, onSubscribedCentrals: centrals) == .sent
        }
    }
}
