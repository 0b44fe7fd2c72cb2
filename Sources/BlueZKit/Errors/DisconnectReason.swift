/// Linux: why a peripheral's link ended, as bluetoothd reports it; the ``BluetoothError/disconnectReason``
/// of the error that `centralManager(_:didDisconnectPeripheral:error:)` receives.
///
/// bluetoothd 5.83 and later send `Device1.Disconnected(reason, message)` as a link ends. The
/// reason it names is not the HCI reason code of the link's end, which no D-Bus API carries,
/// but the kernel's coarser management reason (`MGMT_DEV_DISCONN_*`), which the kernel derives
/// from the HCI code in `hci_to_mgmt_reason` (`net/bluetooth/hci_event.c`): 0x08 is
/// ``connectionTimeout``; 0x13, 0x14 and 0x15 are ``remoteHost``; 0x16 is ``localHost``; every
/// other code (0x05, 0x1A, 0x3B, 0x3D, 0x3E, …) is ``unknown``. Older bluetoothd sends nothing,
/// and the reason is ``notReported``.
///
/// Each reason maps to the Core Bluetooth code of the error (``errorCode``): a supervision timeout
/// is `connectionTimeout`, a peer that lost its keys `peerRemovedPairingInformation`, everything
/// else `peripheralDisconnected`, as Core Bluetooth reports a lost link. Cancelling the connection
/// yourself (`cancelPeripheralConnection`) ends it without an error, as in Core Bluetooth.
/// A link that drops while a connection request is still pending is retried, never reported, so
/// `didFailToConnect` carries no reason.
public enum DisconnectReason: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The link supervision timer ran out (HCI 0x08): the peripheral went out of range, lost
    /// power or stopped answering. bluetoothd's `org.bluez.Reason.Timeout`.
    case connectionTimeout
    /// The peripheral ended the link: HCI 0x13 (remote user terminated), 0x14 (low resources) or
    /// 0x15 (about to power off), which the kernel does not tell apart. bluetoothd's
    /// `org.bluez.Reason.Remote`.
    case remoteHost
    /// This computer ended the link, but not this app's `cancelPeripheralConnection`: another
    /// process (`bluetoothctl disconnect`, another manager's cancel), bluetoothd or the kernel
    /// (HCI 0x16). bluetoothd's `org.bluez.Reason.Local`.
    case localHost
    /// The link ended because authentication or encryption failed with "PIN or key missing"
    /// (HCI 0x06): the peripheral no longer has the keys of an earlier pairing. bluetoothd's
    /// `org.bluez.Reason.Authentication`.
    case authenticationFailure
    /// This computer ended the link as it suspended. bluetoothd's `org.bluez.Reason.Suspend`.
    case localHostSuspend
    /// bluetoothd reported the reason as unknown: an HCI code the kernel does not map (such as
    /// 0x05, 0x1A, 0x3B or 0x3E), or the adapter went down; also a reason newer than this library.
    /// bluetoothd's `org.bluez.Reason.Unknown`.
    case unknown
    /// bluetoothd reported no reason: it sends one only from 5.83 on (Debian 12's 5.66 and
    /// Debian 13's 5.82 send none), and not for a device it removed with the link.
    case notReported

    /// The Core Bluetooth code of the error that reports a link ended for this reason:
    /// ``BluetoothError/Code/connectionTimeout`` for ``connectionTimeout``,
    /// ``BluetoothError/Code/peerRemovedPairingInformation`` for ``authenticationFailure``, and
    /// ``BluetoothError/Code/peripheralDisconnected`` for the others.
    public var errorCode: BluetoothError.Code {
        switch self {
        case .connectionTimeout: .connectionTimeout
        case .authenticationFailure: .peerRemovedPairingInformation
        case .remoteHost, .localHost, .localHostSuspend, .unknown, .notReported: .peripheralDisconnected
        }
    }

    /// A sentence saying what the reason means.
    public var explanation: String {
        switch self {
        case .connectionTimeout:
            "The link timed out (supervision timeout): the peripheral went out of range or stopped answering."
        case .remoteHost: "The peripheral ended the link."
        case .localHost: "This computer ended the link (another process, bluetoothd or the kernel)."
        case .authenticationFailure: "The link ended because the peripheral no longer has the pairing keys."
        case .localHostSuspend: "This computer ended the link as it suspended."
        case .unknown: "The link was lost; bluetoothd reported the reason as unknown."
        case .notReported:
            "The link was lost; bluetoothd did not report why (it does from 5.83 on, as Device1.Disconnected)."
        }
    }

    /// The case name, for logs.
    public var description: String { rawValue }
}

extension BluetoothError {
    /// Linux: why the link ended, when this error reports the end of a peripheral's link (the
    /// error of `centralManager(_:didDisconnectPeripheral:error:)`, also when it reconnects by
    /// itself); `nil` for every other error.
    ///
    /// Read from ``underlying``, a ``DisconnectReport`` that also holds bluetoothd's own sentence.
    public var disconnectReason: DisconnectReason? {
        (underlying as? DisconnectReport)?.reason
    }
}
