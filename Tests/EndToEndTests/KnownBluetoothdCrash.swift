import Testing

/// A test whose peer can make bluetoothd itself crash through a bug of bluetoothd's that
/// BlueZKit cannot avoid: when bluetoothd is gone after such a test *and* its log during the
/// test has `signature`, ``EndToEndScope`` records the crash as a known issue instead of a
/// failure. Any other crash of bluetoothd still fails the test, and every expectation of the
/// test itself still holds.
struct KnownBluetoothdCrash: TestTrait {
    /// A line bluetoothd logs (with `-d`, as in the guest) on the way to this crash.
    let signature: String
    /// What the bug is, for the known issue's comment.
    let explanation: String
}

extension KnownBluetoothdCrash {
    /// Crashes any test that makes a link can meet, whatever its traits.
    static let inAnyTest: [KnownBluetoothdCrash] = [
        .linkLostDuringTheFirstMTUExchange, .requestAsTheLinkClosesHasNoDevicePath,
    ]
}

extension Trait where Self == KnownBluetoothdCrash {
    /// bluetoothd (5.66 to master, 2026-12-06) aborts in libdbus when a request for an
    /// application's attribute (seen: a Write Command) arrives as its link closes:
    /// `att_get_device` fails ("getpeername: Transport endpoint is not connected"), and
    /// `append_options` in `src/gatt-database.c` appends `device_get_path(NULL)` as the
    /// `device` option, which libdbus refuses ("_dbus_check_is_valid_path … failed"). Seen on
    /// 5.82 under load, with Bumble's heart-rate client writing its control point and leaving.
    static var requestAsTheLinkClosesHasNoDevicePath: Self {
        KnownBluetoothdCrash(
            signature: "att_get_device() bt_io_get: getpeername: Transport endpoint is not connected",
            explanation: """
                bluetoothd aborted: a request arriving as the link closed has no device, and \
                src/gatt-database.c append_options sends a NULL object path to libdbus
                """)
    }

    /// bluetoothd 5.82 and 5.87 exited when a new link it made as a central dropped while its
    /// own first MTU exchange was in flight (the GATT client's set-up then fails: "MTU Exchange
    /// failed. ATT ECODE: 0x00", `gatt_client_ready_cb() status: failed`); its log ends in
    /// `att_disconnected_cb` … `btd_gatt_client_disconnected` … `g_attrib_unref=0`. Seen
    /// 2026-12-06 when the Bumble-backed adapter was unplugged right after `Connect`, and under
    /// load (three guests at once) when a btvirt link dropped in the bonded-resubscription test
    /// on 5.87. Not analysed further (no backtrace); not among the crash fixes after 5.87.
    static var linkLostDuringTheFirstMTUExchange: Self {
        KnownBluetoothdCrash(
            signature: "MTU Exchange failed. ATT ECODE: 0x00",
            explanation: """
                bluetoothd exited after a new link dropped during its first MTU exchange \
                (gatt_client_ready_cb failed, then att_disconnected_cb); not yet analysed
                """)
    }

    /// bluetoothd's use-after-free in `src/gatt-database.c` (5.66 to at least 5.87 and master,
    /// 2026-12-06): a link that drops while an application's `WriteValue` (or `ReadValue`) is
    /// outstanding makes `pending_disconnect_cb` clear the operation's queue pointer without
    /// taking it out of the characteristic's `pending_writes`; the application's answer then
    /// frees it (`pending_op_free` skips `queue_remove`), and unregistering the application
    /// (`chrc_free` → `queue_destroy(…, cancel_pending_write)`) touches freed memory.
    static var pendingWriteUseAfterFree: Self {
        KnownBluetoothdCrash(
            signature: "Pending write was canceled when object got removed",
            explanation: """
                bluetoothd use-after-free: a write pending when the link dropped stays queued after \
                it is freed, and unregistering the application touches it (src/gatt-database.c \
                pending_disconnect_cb / pending_op_free)
                """)
    }

    /// bluetoothd 5.66 exited once (1 of 4 runs across 5.66, 5.82 and 5.87, 2026-12-06) as
    /// the central's adapter powered off, right after its GATT server logged a read of
    /// `example-gatt-server`'s database failing with -110 (ETIMEDOUT) as the link dropped:
    /// its last line. Not analysed yet.
    static var serverReadFailedAsTheLinkDropped: Self {
        KnownBluetoothdCrash(
            signature: "read_complete_cb() Read Complete: err -110",
            explanation: """
                bluetoothd 5.66 exited after its GATT server's read failed with ETIMEDOUT as the \
                link dropped (adapter powered off); not yet analysed
                """)
    }
}
