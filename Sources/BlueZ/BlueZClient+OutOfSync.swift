internal import DBus

/// ATT's Database Out Of Sync (0x12), which bluetoothd passes on as it is.
///
/// A GATT server with robust caching refuses every request of a client that is "change-unaware"
/// (Core 5.x, Vol 3, Part G, 2.5.2.1): between a change of its database and that client's
/// confirmation of the Service Changed indication. bluetoothd 5.66 to 5.82 neither waits for
/// that nor retries (`src/shared/gatt-client.c` has no handling for the code), so a read or a
/// subscription made while a peripheral registers its services one after another fails with
/// "Operation failed with ATT error: 0x12". The indication is already on its way: once
/// bluetoothd has confirmed it, the same request succeeds, or fails as it should (the attribute
/// gone) — which is what Core Bluetooth's users see.
extension BlueZClient {
    /// How often, and after how long, a request refused as out of sync is tried again.
    static let outOfSyncRetryDelays: [Duration] = [
        .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
    ]

    /// Whether `error` is bluetoothd's report of ATT error 0x12.
    static func isDatabaseOutOfSync(_ error: DBusError) -> Bool {
        error.name == "org.bluez.Error.Failed" && error.message.hasSuffix("ATT error: 0x12")
    }

    /// Runs `request`, and again after each delay of ``outOfSyncRetryDelays`` while the peripheral
    /// answers Database Out Of Sync; any other outcome is returned at once.
    func retryingOutOfSync<Value: Sendable>(
        _ request: () async throws(DBusError) -> Value
    ) async throws(DBusError) -> Value {
        for delay in Self.outOfSyncRetryDelays {
            do {
                return try await request()
            } catch  where Self.isDatabaseOutOfSync(error) {
                DBusLog.debug("the peripheral's database is out of sync with bluetoothd's; trying again")
                try? await Task.sleep(for: delay)
            }
        }
        return try await request()
    }
}
