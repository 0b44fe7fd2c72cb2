import DBus

/// The socket paths of a remote characteristic: `AcquireNotify` and `AcquireWrite`, and writes
/// sent in the order they were asked for.
extension BlueZClient {
    /// `AcquireNotify({})`: a socket that carries each notification as one datagram, and the MTU.
    ///
    /// bluetoothd 5.66 answers `NotPermitted` ("Notify acquired") when another client holds the
    /// socket, `InProgress` when any client has a `StartNotify` session on the characteristic,
    /// `NotSupported` for a characteristic without the notify property, `Failed` when not connected.
    package func acquireNotify(_ id: AttributeID) async throws(BlueZError) -> BlueZAcquiredSocket {
        try await BlueZError.converting { () async throws(DBusError) -> BlueZAcquiredSocket in
            try await acquire(id, member: "AcquireNotify")
        }
    }

    /// `AcquireWrite({})`: a socket whose datagrams bluetoothd sends as ATT Write Commands, and the MTU.
    package func acquireWrite(_ id: AttributeID) async throws(BlueZError) -> BlueZAcquiredSocket {
        try await BlueZError.converting { () async throws(DBusError) -> BlueZAcquiredSocket in
            try await acquire(id, member: "AcquireWrite")
        }
    }

    private func acquire(_ id: AttributeID, member: MemberName) async throws(DBusError) -> BlueZAcquiredSocket {
        let reply = try await connection.call(
            destination: BlueZNames.service, path: id.path, interface: BlueZNames.gattCharacteristic, member: member,
            arguments: [.stringVariantDictionary([:])])
        guard reply.count == 2, let descriptor = reply[0].unixFDValue, let mtu = reply[1].uint16Value else {
            throw DBusError(.invalidArgs, "\(member) answered '\(reply.map(\.signature.rawValue).joined())', not 'hq'")
        }
        return BlueZAcquiredSocket(descriptor: descriptor, mtu: mtu)
    }

    /// `WriteValue(value, {type})` sent at once, so that writes reach bluetoothd in the order of
    /// the calls; the result comes to `completion` on the connection's queue. Call on that queue.
    package func writeValueInOrder(
        _ id: AttributeID, descriptor: Bool, value: [UInt8], withResponse: Bool,
        completion: @escaping @Sendable (BlueZError?) -> Void
    ) {
        var options: [String: DBusValue] = [:]
        if !descriptor { options["type"] = .string(withResponse ? "request" : "command") }
        let message: DBusMessage
        do throws(DBusError) {
            message = try DBusMessage.methodCall(
                destination: BlueZNames.service, path: id.path,
                interface: descriptor ? BlueZNames.gattDescriptor : BlueZNames.gattCharacteristic,
                member: "WriteValue", arguments: [.bytes(value), .stringVariantDictionary(options)])
        } catch {
            return completion(BlueZError(error))
        }
        connection.callInOrder(message) { result in
            if case .failure(let error) = result { completion(BlueZError(error)) } else { completion(nil) }
        }
    }
}
