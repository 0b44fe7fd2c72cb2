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
        guard var channel = gatt[id]?.writeChannels[attribute] else { return }
        defer {
            gatt[id]?.writeChannels[attribute] = channel
            updateCanSend(peripheral)
        }
        if channel.usesCommands {
            while !channel.waiting.isEmpty, (gatt[id]?.commandsInFlight ?? 0) < Self.commandsInFlightLimit {
                sendCommand(peripheral, characteristic, channel.waiting.removeFirst())
            }
            return
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
                sendCommand(peripheral, characteristic, channel.waiting.removeFirst())
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

    private func sendCommand(_ peripheral: Peripheral, _ characteristic: Characteristic, _ bytes: [UInt8]) {
        let id = peripheral.deviceID
        gatt[id]?.commandsInFlight += 1
        client.writeValueInOrder(characteristic.id, descriptor: false, value: bytes, withResponse: false) {
            [self] error in
            if let error { BlueZLog.warning("a write without response to \(characteristic.uuid) failed: \(error)") }
            guard gatt[id] != nil else { return }
            gatt[id]?.commandsInFlight -= 1
            for (attribute, channel) in gatt[id]?.writeChannels ?? [:]
            where channel.usesCommands && !channel.waiting.isEmpty {
                guard let waiting = gatt[id]?.characteristics[attribute] else { continue }
                flushWrites(peripheral, waiting)
            }
            updateCanSend(peripheral)
        }
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
