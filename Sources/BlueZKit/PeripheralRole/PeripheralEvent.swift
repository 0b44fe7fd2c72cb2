import BlueZ
import Foundation

/// What the peripheral role tells the app: each event is one delegate call (with what goes with
/// it: the snapshot the app reads, the `async` caller waiting for it), applied on the manager's
/// queue in the order it was posted (``PeripheralManager/post(_:)``).
enum PeripheralEvent: Sendable {
    /// Why the delegate may update subscribers again.
    enum Ready: Sendable {
        /// The bus backlog drained after `updateValue` returned false: the room timer is over.
        case backlog
        /// Indication waits that refused an update ended (their confirmations came or timed out).
        case confirmations([CentralSubscriptions.EndedWait])
        /// Every notify socket that refused an update has room again.
        case sockets
    }

    /// The adapter's state (``PeripheralManager/state``), set right before the delegate hears it.
    case state(ManagerState)
    /// The state restored from a previous process, before any other delegate call.
    case willRestore(services: [MutableService], advertisement: AdvertisementData?)
    /// `add(_:)` ended; `done` runs after the delegate (the `async` form).
    case didAdd(MutableService, (any Error)?, done: (@Sendable ((any Error)?) -> Void)?)
    /// `startAdvertising` ended; `saves` when the advertising state changed (saved first).
    case didStartAdvertising((any Error)?, saves: Bool, done: (@Sendable ((any Error)?) -> Void)?)
    /// The manager may update subscribers again.
    case readyToUpdate(Ready)
    /// Centrals subscribed to or unsubscribed from `characteristic`.
    case subscription(PeripheralEngine.SubscriptionChange, [Central], MutableCharacteristic)
    /// A central's read or write request, for the delegate and the streams.
    case request(PeripheralManagerRequest, answeredAlready: Bool)
    /// A write without response (answered already), `bytes` long, leaving the backlog.
    case writeWithoutResponse(ATTRequest, bytes: Int)
    /// The state to restore changed: save it.
    case saveState
    /// `publishL2CAPChannel` ended; `then` runs after the delegate.
    case l2capPublished(L2CAPPSM, BluetoothError?, then: (@Sendable (L2CAPPSM, BluetoothError?) -> Void)?)
    /// `unpublishL2CAPChannel` ended; `then` runs after the delegate.
    case l2capUnpublished(L2CAPPSM, BluetoothError?, then: (@Sendable (BluetoothError?) -> Void)?)
    /// A central opened a channel to a published PSM, or accepting failed.
    case l2capOpened(L2CAPChannel?, BluetoothError?)
}
