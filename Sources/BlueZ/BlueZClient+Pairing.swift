import DBus

/// Pairing, trust and connecting by address: `Device1.Pair`/`CancelPairing`, `Device1.Trusted`
/// and `Adapter1.ConnectDevice`, sent from this client's connection, so that bluetoothd asks
/// the agent registered on the same connection (`agent_get(sender)` in `src/device.c`), or its
/// default agent when there is none.
extension BlueZClient {
    /// How long a `Pair` may take: bluetoothd gives an agent 60 s to answer (`src/agent.c`), and
    /// the kernel's SMP gives each step 30 s; beyond that bluetoothd has lost the pairing.
    package static let pairTimeout: Duration = .seconds(120)

    /// How long a `ConnectDevice` may take: the kernel gives up a connection attempt on its own
    /// well before (an LE connection times out after about 20 s, `le_conn_timeout`).
    package static let connectDeviceTimeout: Duration = .seconds(60)

    /// `Device1.Pair`: pairs (bonding) with the device, connecting it first when needed.
    ///
    /// Must be called on the queue (from a task on ``BlueZBus/executor``) so that a
    /// ``cancelPairing(_:)`` queued after it reaches bluetoothd after it.
    /// - Throws: bluetoothd's error: `alreadyExists` (bonded already), `inProgress`,
    ///   `authenticationFailed`/`Rejected`/`Canceled`/`Timeout`, `connectionAttemptFailed`,
    ///   `unknownObject` (the device is gone); `timeout` after ``pairTimeout``.
    package func pair(_ id: DeviceID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: id.path, interface: BlueZNames.device, member: "Pair",
                timeout: Self.pairTimeout)
        }
    }

    /// `Device1.CancelPairing`: ends a `Pair` in progress, which then fails with
    /// `authenticationCanceled`. - Throws: `doesNotExist` when no pairing is in progress.
    package func cancelPairing(_ id: DeviceID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: id.path, interface: BlueZNames.device,
                member: "CancelPairing", timeout: .seconds(5))
        }
    }

    /// Sets `Device1.Trusted` (`org.freedesktop.DBus.Properties.Set`). bluetoothd signals the
    /// change before it replies (gdbus flushes pending signals before every message it sends),
    /// so the cache holds the new value once this returns.
    package func setTrusted(_ id: DeviceID, _ trusted: Bool) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: id.path, interface: .properties, member: "Set",
                arguments: [
                    .string(BlueZNames.device.rawValue), .string(BlueZDeviceProperties.Property.trusted.name),
                    .variant(.bool(trusted)),
                ], timeout: .seconds(10))
        }
    }

    /// `Adapter1.ConnectDevice({Address, AddressType})`: connects a device by its address,
    /// whether or not bluetoothd has seen it, and returns its device. bluetoothd announces the
    /// device object (`InterfacesAdded`) before it replies, so the cache has it once this returns.
    ///
    /// An experimental method: bluetoothd offers it only when started with `--experimental`.
    /// - Throws: ``BlueZError/isMissingMethod`` when bluetoothd offers no such method;
    ///   `alreadyExists` (bluetoothd 5.68 and older, for a device it knows already); `notReady`
    ///   (adapter off); `invalidArguments`; `other` with bluetoothd's `org.bluez.Failed` when the
    ///   connection failed; `invalidReply` for a reply without an object path of a device.
    package func connectDevice(address: String, random: Bool) async throws(BlueZError) -> DeviceID {
        try await BlueZError.converting { () async throws(DBusError) -> DeviceID in
            let path: ObjectPath? = connection.onQueue { adapterPath }
            guard let path else { throw DBusError(.other("org.bluez.Error.NotReady"), "no adapter") }
            let reply = try await connection.call(
                destination: BlueZNames.service, path: path, interface: BlueZNames.adapter, member: "ConnectDevice",
                arguments: [
                    .stringVariantDictionary([
                        "Address": .string(address), "AddressType": .string(random ? "random" : "public"),
                    ])
                ], timeout: Self.connectDeviceTimeout)
            guard let device = reply.first?.objectPathValue, BlueZGattRequest.address(of: device) != nil else {
                throw DBusError(
                    .invalidSignature,
                    "ConnectDevice answered '\(reply.map(\.signature.rawValue).joined())', not a device")
            }
            return DeviceID(path: device)
        }
    }

    /// The device of our adapter with `address` (any case) that bluetoothd knows (on the queue).
    package func device(withAddress address: String) -> DeviceID? {
        devices.first { $0.1.address?.uppercased() == address.uppercased() }?.0
    }
}

extension BlueZError {
    /// Whether bluetoothd (or the bus) answered that the called method does not exist
    /// (`org.freedesktop.DBus.Error.UnknownMethod`): an experimental method of a bluetoothd
    /// started without `--experimental`, or a method of a later release.
    package var isMissingMethod: Bool { underlying?.code == .unknownMethod }
}
