extension SimulatedBlueZ {
    /// How the simulated bluetoothd behaves where bluetoothd itself is configurable or slow.
    public struct Options: Sendable, Hashable {
        /// How long links, service discovery, pairing and failures take.
        public var timing: Timing
        /// bluetoothd's `[GATT] Cache` setting in `main.conf`.
        public var gattCache: GATTCache
        /// For a link made with `Device1.Connect` (or `Pair`), `Connected` turns true without a
        /// `PropertiesChanged`, as bluetoothd does when its ATT socket's connect callback (which
        /// marks the LE bearer connected and answers `Connect`) runs before the kernel's Device
        /// Connected event: that event then finds the device connected and signals nothing
        /// (`device_add_connection`: "Device … is already connected"). It is a race; the ATT
        /// socket won in 5 of 7 runs on 5.66, 5.82 and 5.87 in the guest, the kernel's event once
        /// on 5.82 and once on 5.87, and its signal then came before the reply
        /// (`ConnectConformance`). The property reads true when the reply arrives either way,
        /// and `ServicesResolved` is still announced; links a
        /// simulated central makes to us are always signalled. The default, true, is the usual
        /// outcome and the one that catches a client waiting for the signal; false plays the
        /// other one (`Connected` signalled before the reply).
        public var omitsConnectedSignal: Bool
        /// Which bluetoothd release the simulator behaves like, where releases differ.
        public var version: Version
        /// bluetoothd's `TemporaryTimeout` in `main.conf`: how long a temporary device (discovered,
        /// never connected or paired) stays after it was last seen; nil never removes it.
        ///
        /// As in bluetoothd 5.66 (`src/device.c`): every advertisement of a temporary device
        /// restarts its timer (`device_update_last_seen` → `set_temporary_timer`), a connection
        /// stops it (`device_add_connection`), a disconnection restarts it
        /// (`device_remove_connection`), and when it fires the device is removed
        /// (`device_disappeared` → `btd_adapter_remove_device`: `InterfacesRemoved`), whether or not
        /// the adapter still discovers. bluetoothd's default is 30 s (`.seconds(30)`); the
        /// simulator's default, nil, is `TemporaryTimeout = 0` (no timer), so that a test's devices
        /// stay however long it runs.
        public var temporaryTimeout: Duration?
        /// Serve `org.bluez.AdvertisementMonitorManager1` on every adapter, as bluetoothd does when
        /// started with `--experimental` (`-E`); false, the default, leaves it out as bluetoothd
        /// does without that flag. Monitors match as ``SimulatedAdvertisementMonitor`` describes.
        /// As `-E` does for bluetoothd 5.66, it also shows `LEAdvertisingManager1`'s
        /// `SupportedFeatures` and `SupportedCapabilities` and makes an advertisement's
        /// `MinInterval`, `MaxInterval` and `TxPower` count (5.82 does both without it).
        public var advertisementMonitor: Bool
        /// Serve what bluetoothd serves when started with `--experimental` (`-E`):
        /// `Adapter1.ConnectDevice`, the advertisement monitor, and on 5.66 the advertising
        /// parameters (as ``advertisementMonitor`` does alone). False, the default, answers `ConnectDevice` with D-Bus's `UnknownMethod`
        /// as bluetoothd without the flag does.
        public var experimental: Bool
        /// The request that starts a pairing fails at once with ATT 0x0E (Unlikely Error) while
        /// the pairing goes on, as bluetoothd's request does when it loses a race with the security
        /// it asked for: bluetoothd (`src/shared/att.c`, 5.66 to at least 5.87) queues the request
        /// again after the peripheral's Insufficient Authentication and, when its event loop saw the
        /// ATT socket writable in the same wake-up, writes it into the socket the kernel holds for
        /// the pairing ("write failed: Transport endpoint is not connected"). Requests made during
        /// the pairing wait for it either way, as the held socket makes them. False, the default,
        /// is the usual outcome (the request is answered after the pairing).
        public var losesTheSecurityRetry = false

        /// Options; the defaults are fast timing, bluetoothd's default cache (`always`), no
        /// `Connected` signal for links made with `Connect`, bluetoothd 5.66, no temporary timeout,
        /// no advertisement monitor and no experimental methods.
        public init(
            timing: Timing = .fast, gattCache: GATTCache = .always, omitsConnectedSignal: Bool = true,
            version: Version = .bluez5_66, temporaryTimeout: Duration? = nil, advertisementMonitor: Bool = false,
            experimental: Bool = false
        ) {
            self.advertisementMonitor = advertisementMonitor
            self.experimental = experimental
            self.timing = timing
            self.gattCache = gattCache
            self.omitsConnectedSignal = omitsConnectedSignal
            self.version = version
            self.temporaryTimeout = temporaryTimeout
        }
    }

    /// The bluetoothd releases the simulator can behave like (Debian 12's, Debian 13's and
    /// Debian forky's), oldest first.
    public enum Version: String, Sendable, Hashable, CaseIterable, Comparable {
        /// bluetoothd 5.66: a characteristic that offers `AcquireNotify` gets one socket, for the
        /// first subscribing central, and what is written to it reaches every subscriber.
        case bluez5_66
        /// bluetoothd 5.82: `AcquireNotify` is called for each subscribing central, with its
        /// `device`; what is written to a central's socket reaches that central only (5.76), and
        /// each indication the central confirms writes `0x01` back to its socket (5.80). The
        /// adapter has `Manufacturer` (5.71) and `Connectable` (5.79). A discovery filter that
        /// sets nothing but, at most, the adapter's own transport counts as no filter (5.67): on
        /// an LE-only adapter (``SimulatedAdapter/Configuration/dualMode`` false) such a scan does
        /// not report advertisers without a discoverable flag.
        case bluez5_82
        /// bluetoothd 5.87: what 5.82 does, and as a link ends `Device1.Disconnected(reason,
        /// message)` before `Connected` turns false (5.83, `device_disconnected`), with the reason
        /// the link ended for (a peripheral's drop is `org.bluez.Reason.Remote`, one out of range
        /// `org.bluez.Reason.Timeout`, a `Disconnect` `org.bluez.Reason.Local`, the adapter going
        /// down `org.bluez.Reason.Unknown`). Regular discovery no longer creates a device for a
        /// connectable advertiser without a discoverable flag (5.84).
        case bluez5_87

        /// Whether `lhs` is an older release than `rhs`.
        public static func < (lhs: Version, rhs: Version) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// The durations of operations that take time in a real controller and bluetoothd.
    ///
    /// Each step still happens in its own turn of the simulator's loop, so
    /// signal order is the same with zero durations.
    public struct Timing: Sendable, Hashable {
        /// From `Connect` to the link being up (`Connected` true and the `Connect` reply).
        public var connection: Duration
        /// From the link being up to the GATT objects and `ServicesResolved` true.
        public var serviceDiscovery: Duration
        /// How long a `Connect` to an unreachable peripheral waits before it fails with
        /// `org.bluez.Error.Failed` "le-connection-abort-by-local" (the kernel's LE connection timeout).
        public var connectTimeout: Duration
        /// bluetoothd's disconnect timer: `Disconnect` tears the link down this long after it was called (2 s in 5.66).
        public var disconnect: Duration
        /// How long just-works pairing takes.
        public var pairing: Duration

        /// Durations for each step.
        public init(
            connection: Duration, serviceDiscovery: Duration, connectTimeout: Duration, disconnect: Duration,
            pairing: Duration
        ) {
            self.connection = connection
            self.serviceDiscovery = serviceDiscovery
            self.connectTimeout = connectTimeout
            self.disconnect = disconnect
            self.pairing = pairing
        }

        /// For tests: no waiting, and an unreachable `Connect` fails after 50 ms.
        public static let fast = Timing(
            connection: .zero, serviceDiscovery: .zero, connectTimeout: .milliseconds(50), disconnect: .zero,
            pairing: .zero)

        /// Close to a real controller: 30 ms links, 300 ms service discovery, 20 s connect timeout, 2 s disconnect timer.
        public static let realistic = Timing(
            connection: .milliseconds(30), serviceDiscovery: .milliseconds(300), connectTimeout: .seconds(20),
            disconnect: .seconds(2), pairing: .milliseconds(200))
    }

    /// What bluetoothd keeps of a device's GATT database after a disconnection (`[GATT] Cache` in `main.conf`).
    public enum GATTCache: String, Sendable, Hashable {
        /// Keep it for every device: the GATT objects stay exported while disconnected (bluetoothd's default).
        case always
        /// Keep it for paired devices only; others lose their GATT objects (`InterfacesRemoved`) on disconnection.
        case yes
        /// Never keep it: GATT objects are removed on every disconnection.
        case no
    }
}
