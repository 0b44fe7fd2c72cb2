import BlueZ
import Foundation

/// Writes without response: through the socket of `AcquireWrite` where bluetoothd offers it
/// (characteristics with the write-without-response property), as `WriteValue` with type
/// `command` otherwise. Writes leave in the order they were made and are never dropped: what
/// cannot go at once waits here, `canSendWriteWithoutResponse` turns false, and
/// `peripheralIsReady(toSendWriteWithoutResponse:)` follows when the wait is over.
extension CentralEngine {
    /// The write-without-response path of one characteristic. Queue-confined.
    struct WriteChannel {
        var socket: BlueZWriteSocket?
        var acquiring = false
        /// bluetoothd refused `AcquireWrite`: this characteristic uses `WriteValue`.
        var usesCommands = false
        /// Writes that could not go yet, in order.
        var waiting: [[UInt8]] = []
    }

    /// `WriteValue` commands that may wait for bluetoothd's answers before writes queue here.
    static let commandsInFlightLimit = 16

    func writeWithoutResponse(_ peripheral: Peripheral, _ bytes: [UInt8], characteristic: Characteristic) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        var channel = gatt[id]?.writeChannels[attribute] ?? WriteChannel()
        if !channel.usesCommands && client.characteristic(attribute)?.offersAcquireWrite != true {
            channel.usesCommands = true
        }
        channel.waiting.append(bytes)
        gatt[id]?.writeChannels[attribute] = channel
        flushWrites(peripheral, characteristic)
    }

    /// Sends what waits on `characteristic`'s channel, until the path is full.
    private func flushWrites(_ peripheral: Peripheral, _ characteristic: Characteristic) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        if gatt[id]?.writeChannels[attribute]?.usesCommands == true { return flushCommands(peripheral) }
        guard var channel = gatt[id]?.writeChannels[attribute] else { return }
        defer {
            gatt[id]?.writeChannels[attribute] = channel
            updateCanSend(peripheral)
        }
        guard let socket = channel.socket else {
            if !channel.acquiring {
                channel.acquiring = true
                acquireWrite(peripheral, characteristic)
            }
            return
        }
        while let bytes = channel.waiting.first {
            if bytes.isEmpty {
                // bluetoothd 5.66 takes an empty datagram for the end of the socket and stops
                // reading it (`sock_read`): every later write would be lost. WriteValue is refused
                // while the socket is held ("Write acquired"). So an empty write is not sent.
                BlueZLog.warning(
                    "an empty write without response to \(characteristic.uuid) is not sent: see AcquireWrite")
                channel.waiting.removeFirst()
                continue
            }
            if bytes.count > socket.mtu - 3 {
                // Longer than one ATT packet: WriteValue gets bluetoothd's error, which is logged.
                // Its completion may come before the call returns (a closed connection): the
                // channel is stored first, so that what it does sees the queue as it is.
                channel.waiting.removeFirst()
                gatt[id]?.writeChannels[attribute] = channel
                sendCommand(peripheral, characteristic, bytes)
                guard let current = gatt[id]?.writeChannels[attribute] else { return }
                channel = current
                continue
            }
            switch socket.send(bytes) {
            case .sent:
                channel.waiting.removeFirst()
            case .wouldBlock:
                socket.whenWritable { [weak self] in self?.flushWrites(peripheral, characteristic) }
                return
            case .closed:
                channel.socket = nil
                channel.acquiring = true
                acquireWrite(peripheral, characteristic)
                return
            }
        }
    }

    private func acquireWrite(_ peripheral: Peripheral, _ characteristic: Characteristic) {
        let id = peripheral.deviceID
        let attribute = characteristic.id
        onBusQueue { [self] in
            let result: Result<BlueZAcquiredSocket, BlueZError>
            do throws(BlueZError) {
                result = .success(try await client.acquireWrite(attribute))
            } catch {
                result = .failure(error)
            }
            // The link ended meanwhile: the descriptor (if any) closes with `result`.
            guard gatt[id]?.writeChannels[attribute] != nil else { return }
            switch result {
            case .success(let acquired):
                gatt[id]?.writeChannels[attribute]?.socket = BlueZWriteSocket(
                    acquired, queue: busQueue,
                    onClose: { [weak self] in self?.writeSocketClosed(peripheral, characteristic) })
            case .failure(let error):
                BlueZLog.debug("AcquireWrite refused (\(error)); writing with WriteValue commands")
                gatt[id]?.writeChannels[attribute]?.usesCommands = true
            }
            gatt[id]?.writeChannels[attribute]?.acquiring = false
            flushWrites(peripheral, characteristic)
        }
    }

    /// bluetoothd closed the write socket (the link went down, or it exits): writes that waited
    /// for room go on through a new socket (or commands) while the link lasts; when it has gone,
    /// `resetGatt` drops them with the rest of the link's state.
    private func writeSocketClosed(_ peripheral: Peripheral, _ characteristic: Characteristic) {
        gatt[peripheral.deviceID]?.writeChannels[characteristic.id]?.socket = nil
        if gatt[peripheral.deviceID]?.writeChannels[characteristic.id]?.waiting.isEmpty == false {
            flushWrites(peripheral, characteristic)
        }
    }

    /// Sends the writes waiting on the `WriteValue` paths of `peripheral` while fewer than
    /// ``commandsInFlightLimit`` are unanswered. A loop that takes each write out of the stored
    /// queue before it sends it, and is never entered twice: the completion of a command that
    /// fails before its call returns (the connection closed) finds it running and leaves the
    /// rest to it.
    private func flushCommands(_ peripheral: Peripheral) {
        let id = peripheral.deviceID
        guard let model = gatt[id], !model.flushingCommands else { return }
        gatt[id]?.flushingCommands = true
        while (gatt[id]?.commandsInFlight ?? Self.commandsInFlightLimit) < Self.commandsInFlightLimit,
            let (attribute, bytes) = takeCommand(id)
        {
            guard let characteristic = gatt[id]?.characteristics[attribute] else {
                // Not an attribute of this link any more: its writes cannot go.
                gatt[id]?.writeChannels[attribute]?.waiting.removeAll()
                continue
            }
            sendCommand(peripheral, characteristic, bytes)
        }
        gatt[id]?.flushingCommands = false
        updateCanSend(peripheral)
    }

    /// Takes the next write out of a `WriteValue` path's stored queue.
    private func takeCommand(_ id: DeviceID) -> (AttributeID, [UInt8])? {
        guard
            let attribute = gatt[id]?.writeChannels.first(where: { $0.value.usesCommands && !$0.value.waiting.isEmpty }
            )?.key,
            let bytes = gatt[id]?.writeChannels[attribute]?.waiting.removeFirst()
        else { return nil }
        return (attribute, bytes)
    }

    private func sendCommand(_ peripheral: Peripheral, _ characteristic: Characteristic, _ bytes: [UInt8]) {
        let id = peripheral.deviceID
        gatt[id]?.commandsInFlight += 1
        client.writeValueInOrder(characteristic.id, descriptor: false, value: bytes, withResponse: false) {
            [self] error in
            gatt[id]?.commandsInFlight -= 1
            if let error, error.code == .disconnected {
                return endWrites(peripheral, characteristic, error)
            }
            if let error { BlueZLog.warning("a write without response to \(characteristic.uuid) failed: \(error)") }
            guard gatt[id] != nil else { return }
            flushCommands(peripheral)
        }
    }

    /// The bus connection closed (the manager was released, or the bus went): no write can go
    /// any more. Every write that waits is dropped, with one warning (that says how many) the
    /// first time; the commands still in flight, and writes made later, fail without another.
    private func endWrites(_ peripheral: Peripheral, _ characteristic: Characteristic, _ error: BlueZError) {
        let id = peripheral.deviceID
        guard let model = gatt[id] else {
            return BlueZLog.debug("a write without response to \(characteristic.uuid) failed: \(error)")
        }
        let waiting = model.writeChannels.values.reduce(0) { $0 + $1.waiting.count }
        for attribute in model.writeChannels.keys { gatt[id]?.writeChannels[attribute]?.waiting.removeAll() }
        if model.writesEnded {
            BlueZLog.debug("a write without response to \(characteristic.uuid) failed: \(error)")
        } else {
            BlueZLog.warning(
                "writes without response to \(characteristic.uuid) and the rest of the peripheral fail:"
                    + " the bus connection closed (\(error))"
                    + (waiting > 0 ? "; \(waiting) waiting writes are not sent" : ""))
        }
        gatt[id]?.writesEnded = true
        updateCanSend(peripheral)
    }

    /// Keeps `canSendWriteWithoutResponse` true exactly while nothing waits, and tells the
    /// delegate when a wait ends.
    private func updateCanSend(_ peripheral: Peripheral) {
        let model = gatt[peripheral.deviceID]
        let waiting = model?.writeChannels.values.contains { !$0.waiting.isEmpty && !$0.acquiring } ?? false
        let full = (model?.commandsInFlight ?? 0) >= Self.commandsInFlightLimit
        let canSend = !waiting && !full
        guard canSend != peripheral.canSendWriteWithoutResponse else { return }
        peripheral.update(canSendWriteWithoutResponse: canSend)
        if canSend { manager?.post(.gatt(peripheral, .readyToSendWriteWithoutResponse)) }
    }
}
