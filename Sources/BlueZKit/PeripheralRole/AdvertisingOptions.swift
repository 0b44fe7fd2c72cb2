/// Linux: how an advertisement goes on the air, beyond Core Bluetooth's advertisement data: its
/// interval, its TX power, the TX power field, and the PHY of its secondary channel.
///
/// Pass them to ``PeripheralManager/startAdvertising(_:options:)-(AdvertisementData,_)``. Each
/// becomes a property of the `LEAdvertisement1` object bluetoothd reads
/// (doc/org.bluez.LEAdvertisement.rst): `MinInterval`/`MaxInterval`, `TxPower`,
/// `Includes ["tx-power"]`, `SecondaryChannel`. Before registering, the manager checks what the
/// adapter's `LEAdvertisingManager1` reports it can do, and refuses with
/// ``BluetoothError/Code/operationNotSupported`` what bluetoothd would ignore or refuse:
/// - intervals and TX power on a bluetoothd that ignores them (before 5.77 without
///   `--experimental`: `SupportedCapabilities` is then absent);
/// - a TX power on a controller that cannot set it per advertisement (no `CanSetTxPower` in
///   `SupportedFeatures`: controllers without extended advertising, such as btvirt's);
/// - a secondary PHY the controller does not list in `SupportedSecondaryChannels` (none on a
///   controller without extended advertising).
///
/// Values out of bluetoothd's ranges are ``BluetoothError/Code/invalidParameters``.
/// Saved and restored with the advertisement by a manager with a restore identifier.
public struct AdvertisingOptions: Hashable, Sendable, Codable {
    /// The PHY of an extended advertisement's secondary channel (`SecondaryChannel`); the primary
    /// channel is LE 1M except for `.leCoded`, where both are coded.
    public enum SecondaryPHY: String, Hashable, Sendable, Codable, CaseIterable {
        /// LE 1M (bluetoothd's default): "1M".
        case le1M = "1M"
        /// LE 2M: "2M".
        case le2M = "2M"
        /// LE Coded (long range): "Coded".
        case leCoded = "Coded"
    }

    /// The range the controller picks each advertising interval from (`MinInterval`,
    /// `MaxInterval`), in whole milliseconds (finer parts are dropped); nil leaves the kernel's
    /// default (1.28 s). Within ``allowedIntervals``.
    public var interval: ClosedRange<Duration>?
    /// The TX power to ask for, in dBm (`TxPower`), from −127 to 20; nil leaves it to the
    /// controller. The controller uses the nearest it can (see the adapter's range in the error
    /// message when it cannot at all).
    public var txPower: Int?
    /// Whether the advertisement carries a TX Power Level field (`Includes` "tx-power"), which the
    /// kernel fills with the power the controller selected.
    public var includesTxPower: Bool
    /// The secondary channel's PHY (`SecondaryChannel`); nil leaves bluetoothd's default (1M).
    /// Asking for one makes the advertisement extended where the controller can.
    public var secondaryPHY: SecondaryPHY?

    /// The intervals bluetoothd takes: 20 ms to 10,485.759 s (0x20 to 0xFFFFFF units of 0.625 ms).
    public static let allowedIntervals: ClosedRange<Duration> = .milliseconds(20) ... .milliseconds(10_485_759)
    /// The TX powers bluetoothd takes, in dBm.
    public static let allowedTxPowers: ClosedRange<Int> = -127...20

    /// Options; every default leaves the choice to bluetoothd and the controller.
    public init(
        interval: ClosedRange<Duration>? = nil, txPower: Int? = nil, includesTxPower: Bool = false,
        secondaryPHY: SecondaryPHY? = nil
    ) {
        self.interval = interval
        self.txPower = txPower
        self.includesTxPower = includesTxPower
        self.secondaryPHY = secondaryPHY
    }

    /// Whether nothing is asked for.
    var isEmpty: Bool { interval == nil && txPower == nil && !includesTxPower && secondaryPHY == nil }

    /// The interval in whole milliseconds, as bluetoothd takes it.
    var intervalMilliseconds: ClosedRange<UInt32>? {
        interval.map {
            UInt32(clamping: Self.milliseconds($0.lowerBound))...UInt32(clamping: Self.milliseconds($0.upperBound))
        }
    }

    /// Why bluetoothd would refuse these values (its ranges, src/advertising.c), or nil.
    var invalidReason: String? {
        if let interval {
            guard Self.allowedIntervals.contains(interval.lowerBound),
                Self.allowedIntervals.contains(interval.upperBound)
            else {
                return "the advertising interval \(interval) is outside \(Self.allowedIntervals)"
            }
        }
        if let txPower, !Self.allowedTxPowers.contains(txPower) {
            return "the TX power \(txPower) dBm is outside \(Self.allowedTxPowers) dBm"
        }
        return nil
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
