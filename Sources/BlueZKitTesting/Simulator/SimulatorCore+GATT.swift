internal import DBus
import Locking

/// `GattCharacteristic1` and `GattDescriptor1` of remote devices (`src/gatt-client.c`), served by the
/// simulated peripheral's GATT database.
extension SimulatorCore {
    func handleGATTCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, _ arguments: [DBusValue]
    ) {
        guard let node = gattObjects[path], let device = devices[node.device] else {
            return reply(invocation, error: BlueZErrors.unknownObject(path.rawValue))
        }
        let sender = invocation.sender?.rawValue ?? ""
        switch (node, member) {
        case (.characteristic(let characteristic), "StartNotify"):
            startNotify(invocation, characteristic, sender: sender, connected: device.connected)
        case (.characteristic(let characteristic), "StopNotify"):
            // Acquired notifications end whoever stops them.
            if characteristic.notifyIO != nil {
                stopAcquiredNotify(characteristic)
                return reply(invocation)
            }
            guard characteristic.notifyClients.contains(sender) else {
                return reply(invocation, error: BlueZErrors.failed("No notify session started"))
            }
            removeNotifySession(path, owner: sender)
            reply(invocation)
        case (.characteristic(let characteristic), "AcquireWrite"):
            if device.connected, refusesWrites(to: node) { return reply(invocation, error: BlueZErrors.notAuthorized) }
            acquireWrite(invocation, characteristic)
        case (.characteristic(let characteristic), "AcquireNotify"):
            acquireNotify(invocation, characteristic, sender: sender)
        default:
            guard device.connected, peripheral(of: device) != nil else {
                return reply(invocation, error: BlueZErrors.failed("Not connected"))
            }
            if member == "WriteValue", case .characteristic(let characteristic) = node, characteristic.writeIO != nil {
                return reply(invocation, error: BlueZErrors.notPermitted("Write acquired"))
            }
            let write = member == "WriteValue"
            if !device.paired, Self.needsEncryption(node, write: write) {
                // bluetoothd pairs first when the peripheral asks for encryption (the kernel raises
                // the security level), asking the default agent to authorize just-works.
                let starts = securityWaiters[device.path] == nil
                if starts, self.options.losesTheSecurityRetry {
                    reply(invocation, error: BlueZErrors.gatt(SimulatedATTError.unlikelyError.code))
                } else {
                    securityWaiters[device.path, default: []].append { [self] paired in
                        guard paired else {
                            return reply(invocation, error: BlueZErrors.gatt(SimulatedATTError.unlikelyError.code))
                        }
                        handleGATTCall(invocation, member, path, arguments)
                    }
                }
                guard starts else { return }
                securityWaiters[device.path] = securityWaiters[device.path] ?? []
                return pairForSecurity(device.path) { [self] paired in
                    if !paired { linkLost(device.path, .local) }
                    for waiter in securityWaiters.removeValue(forKey: device.path) ?? [] { waiter(paired) }
                }
            }
            guard let options = GATTOptions(write ? arguments.last : arguments.first) else {
                return reply(invocation, error: BlueZErrors.invalidArguments())
            }
            if write, refusesWrites(to: node) { return reply(invocation, error: BlueZErrors.notAuthorized) }
            switch (node, member) {
            case (_, "ReadValue"):
                read(invocation, node, device: device, offset: options.offset)
            case (.characteristic(let characteristic), "WriteValue"):
                writeCharacteristic(
                    invocation, characteristic, arguments.first?.bytesValue ?? [], options, device: device)
            case (.descriptor(let descriptor), "WriteValue"):
                if descriptor.kind == .clientConfiguration {
                    return reply(invocation, error: BlueZErrors.notPermitted("Write not permitted"))
                }
                let request = SimulatedWriteRequest(
                    value: arguments.first?.bytesValue ?? [], offset: options.offset, kind: .request)
                let result = serveWrite(
                    descriptor.object.writeHandler, descriptor.object.storage, descriptor.flags, request, device: device
                )
                finishWrite(invocation, result)
            default:
                reply(invocation, error: BlueZErrors.notSupported)
            }
        }
    }

    /// The `offset` and `type` options of `ReadValue` / `WriteValue` (`parse_options`): wrong types are invalid.
    private struct GATTOptions {
        var offset = 0
        var type: String?

        init?(_ argument: DBusValue?) {
            for entry in argument?.dictionaryEntries ?? [] {
                guard case .string(let key) = entry.key, case .variant(let value) = entry.value else { return nil }
                switch key.lowercased() {
                case "offset":
                    guard case .uint16(let offset) = value else { return nil }
                    self.offset = Int(offset)
                case "type":
                    guard case .string(let type) = value else { return nil }
                    self.type = type
                default: break
                }
            }
        }
    }

    // MARK: Read

    private func read(_ invocation: DBusMethodInvocation, _ node: GATTNode, device: DeviceState, offset: Int) {
        let result: Result<[UInt8], SimulatedATTError>
        switch node {
        case .characteristic(let characteristic):
            result = serveRead(
                characteristic.object.readHandler, characteristic.object.storage, characteristic.flags, offset,
                device: device)
        case .descriptor(let descriptor) where descriptor.kind == .clientConfiguration:
            let value = devices[device.path]?.clientConfigurations[descriptor.characteristicValueHandle] ?? 0
            let bytes: [UInt8] = [UInt8(value & 0xff), UInt8(value >> 8)]
            result = offset > bytes.count ? .failure(.invalidOffset) : .success(Array(bytes[offset...]))
        case .descriptor(let descriptor):
            result = serveRead(
                descriptor.object.readHandler, descriptor.object.storage, descriptor.flags, offset, device: device)
        case .service:
            result = .failure(.requestNotSupported)
        }
        guard case .success(let bytes) = result else {
            if case .failure(let error) = result { reply(invocation, error: BlueZErrors.gatt(error.code)) }
            return
        }
        // bluetoothd stores what it read in its cache and announces it, then replies.
        updateCachedValue(node, bytes, offset: offset)
        reply(invocation, [.bytes(bytes)])
    }

    func serveRead(
        _ handler: SimulatedCharacteristic.ReadHandler?, _ storage: PosixMutex<[UInt8]>, _ flags: AttributeFlags,
        _ offset: Int,
        device: DeviceState
    ) -> Result<[UInt8], SimulatedATTError> {
        guard flags.readable else { return .failure(.readNotPermitted) }
        if let failure = securityCheck(flags.readSecurity, device: device) { return .failure(failure) }
        let value: [UInt8]
        if let handler {
            do throws(SimulatedATTError) {
                value = try handler(SimulatedReadRequest(offset: offset))
            } catch {
                return .failure(error)
            }
        } else {
            value = storage.withLock { $0 }
        }
        guard offset <= value.count else { return .failure(.invalidOffset) }
        return .success(Array(value[offset...]))
    }

    /// Checks the link security an operation needs once pairing had its chance (see
    /// `needsEncryption`); authentication cannot be had with just-works pairing.
    private func securityCheck(_ security: AttributeFlags.Security, device: DeviceState) -> SimulatedATTError? {
        switch security {
        case .none: return nil
        case .encrypted:
            guard device.paired else {
                linkLost(device.path, .local)
                return .unlikelyError
            }
            return nil
        case .authenticated, .secure:
            return .insufficientAuthentication
        }
    }

    /// Whether reading (or writing) `node` needs an encrypted link, which just-works pairing gives.
    private static func needsEncryption(_ node: GATTNode, write: Bool) -> Bool {
        let flags: AttributeFlags
        switch node {
        case .characteristic(let characteristic): flags = characteristic.flags
        case .descriptor(let descriptor): flags = descriptor.flags
        case .service: return false
        }
        return (write ? flags.writeSecurity : flags.readSecurity) == .encrypted
    }

    private func updateCachedValue(_ node: GATTNode, _ bytes: [UInt8], offset: Int) {
        // Like gatt_db_attribute_write: a read from offset 0 replaces the value; a read from an
        // offset writes over the cached bytes there, extending but never truncating.
        func merged(_ cached: [UInt8]) -> [UInt8] {
            guard offset > 0 else { return bytes }
            var value = cached + Array(repeating: 0, count: max(0, offset + bytes.count - cached.count))
            value.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
            return value
        }
        switch node {
        case .characteristic(var characteristic):
            characteristic.cachedValue = merged(characteristic.cachedValue)
            gattObjects[characteristic.path] = .characteristic(characteristic)
            propertiesChanged(characteristic.path, "org.bluez.GattCharacteristic1", ["Value"], flushNow: true)
        case .descriptor(var descriptor):
            descriptor.cachedValue = merged(descriptor.cachedValue)
            gattObjects[descriptor.path] = .descriptor(descriptor)
            propertiesChanged(descriptor.path, "org.bluez.GattDescriptor1", ["Value"])
        case .service:
            break
        }
    }

    // MARK: Write

    private func writeCharacteristic(
        _ invocation: DBusMethodInvocation, _ characteristic: GATTNode.Characteristic, _ value: [UInt8],
        _ options: GATTOptions, device: DeviceState
    ) {
        let flags = characteristic.flags
        let kind: SimulatedWriteRequest.Kind
        switch options.type?.lowercased() {
        case nil:
            if flags.extendedProperties & AttributeFlags.reliableWrite != 0 {
                kind = .reliable
            } else if flags.properties & AttributeFlags.write != 0 {
                kind = .request
            } else if flags.properties & AttributeFlags.writeWithoutResponse != 0 && options.offset == 0 {
                kind = .command
            } else {
                return reply(invocation, error: BlueZErrors.notSupported)
            }
        case "reliable": kind = .reliable
        case "request": kind = .request
        case "command" where options.offset == 0: kind = .command
        default: return reply(invocation, error: BlueZErrors.notSupported)
        }
        let request = SimulatedWriteRequest(value: value, offset: options.offset, kind: kind)
        let object = characteristic.object
        if kind == .command {
            guard writeWithoutResponse(characteristic, value, device: device) else {
                return reply(invocation, error: BlueZErrors.failed("Failed to initiate write"))
            }
            return reply(invocation)
        }
        finishWrite(invocation, serveWrite(object.writeHandler, object.storage, flags, request, device: device))
    }

    /// Sends a write command (`bt_gatt_client_write_without_response`); false when it cannot be
    /// sent, being longer than the ATT MTU less 3. `WriteValue` of type `command` and each datagram
    /// of an `AcquireWrite` socket come this way.
    func writeWithoutResponse(_ characteristic: GATTNode.Characteristic, _ value: [UInt8], device: DeviceState)
        -> Bool
    {
        guard value.count <= Int(device.mtu) - 3 else { return false }
        let request = SimulatedWriteRequest(value: value, offset: 0, kind: .command)
        let object = characteristic.object
        // A write command has no response: the peripheral's verdict never reaches the central.
        _ = serveWrite(object.writeHandler, object.storage, characteristic.flags, request, device: device)
        return true
    }

    private func serveWrite(
        _ handler: SimulatedCharacteristic.WriteHandler?, _ storage: PosixMutex<[UInt8]>, _ flags: AttributeFlags,
        _ request: SimulatedWriteRequest, device: DeviceState
    ) -> SimulatedATTError? {
        guard flags.writable else { return .writeNotPermitted }
        if let failure = securityCheck(flags.writeSecurity, device: device) { return failure }
        if let handler {
            do throws(SimulatedATTError) {
                try handler(request)
            } catch {
                return error
            }
            return nil
        }
        return storage.withLock { stored -> SimulatedATTError? in
            guard request.offset <= stored.count else { return .invalidOffset }
            stored = Array(stored[..<request.offset]) + request.value
            return nil
        }
    }

    private func finishWrite(_ invocation: DBusMethodInvocation, _ failure: SimulatedATTError?) {
        if let failure { reply(invocation, error: BlueZErrors.gatt(failure.code)) } else { reply(invocation) }
    }
}
