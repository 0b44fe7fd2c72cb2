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
        .linkLostDuringTheFirstMTUExchange, .requestAsTheLinkClosesHasNoDevicePath, .databaseOutOfSyncRecovery,
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

    /// bluetoothd 5.87 exited as its GATT client got "Database Out of Sync" (ATT 0x12) for a read
    /// (our central's `ReadValue`) while a Service Changed indication from the same peer was
    /// being handled: the peer (heart-rate-peripheral, restored after a SIGKILL) was publishing
    /// its services again one application at a time, each changing its database hash. The log
    /// ends at `handle_error_rsp() … DB out of sync for operation`, the recovery new in 5.87
    /// (7c9c8630c "gatt-client: Implement error handling for DB_OUT_OF_SYNC"). Our reading of
    /// its source: `gatt_client_new` sets the ATT bearer's single out-of-sync callback for every
    /// client, clones included (`bt_gatt_client_clone`, one per profile such as battery and
    /// device information), and `bt_gatt_client_free` never clears it; once such a clone is
    /// freed (the peer's Battery and Device Information services went with its process), the
    /// next 0x12 calls `gatt_client_db_sync_cb` with freed memory. Seen 2026-12-06 in
    /// `aKilledPeripheralIsRestored…` under load (2 of 2 runs on 5.87; CI had the same test time
    /// out with bluetoothd gone, its log cut). Unchanged on master.
    static var databaseOutOfSyncRecovery: Self {
        KnownBluetoothdCrash(
            signature: "DB out of sync for operation",
            explanation: """
                bluetoothd 5.87 exited in its new Database Out of Sync recovery (a read answered \
                ATT 0x12 while a Service Changed indication was handled)
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

    /// bluetoothd 5.66 exited as the central's adapter powered off (twice, 2026-12-06), right
    /// after its GATT server logged a read of `example-gatt-server`'s database failing with
    /// -110 (ETIMEDOUT) as the link dropped. The second time its log went on with GLib's
    /// "Source ID … was not found when attempting to remove it" and "g_io_add_watch_full:
    /// assertion 'channel != NULL' failed", each with a backtrace: the failed read's error
    /// response is sent on an ATT channel already freed with the link. It died only after the
    /// test had ended (the backtraces take a while to print), so ``EndToEndScope`` checks the
    /// next test's start against this test's known crashes too. Not analysed further.
    static var serverReadFailedAsTheLinkDropped: Self {
        KnownBluetoothdCrash(
            signature: "read_complete_cb() Read Complete: err -110",
            explanation: """
                bluetoothd 5.66 exited after its GATT server's read failed with ETIMEDOUT as the \
                link dropped (adapter powered off); not yet analysed
                """)
    }
}
