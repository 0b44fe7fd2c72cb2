import BlueZ
import Foundation
import Locking

/// Pairing on demand, trust, and connecting by address: Linux additions, on the bus queue.
///
/// `Pair` and `ConnectDevice` go out on the engine's own connection, the one the manager's
/// agent (if the app asked for one) is registered on, so bluetoothd asks that agent.
extension CentralEngine {
    // MARK: Pairing

    /// `Device1.Pair` (any thread but the queue). Already bonded (`Device1.Bonded`, or `Paired`
    /// before 5.68, or `AlreadyExists`) is success, with nothing sent.
    /// Cancelling the calling task sends `CancelPairing` when `Pair` went out, and ends the call
    /// at once with `operationCancelled`.
    func pair(_ peripheral: Peripheral) async throws(BluetoothError) {
        let id = peripheral.deviceID
        let sent = PosixMutex(false)
        let outcome = await runCancellable { [self] cancelled -> Result<Void, BluetoothError> in
            guard let device = client.device(id) else {
                return .failure(BluetoothError(.unknownDevice, message: "bluetoothd knows no device \(peripheral)"))
            }
            // Bonded already: nothing to send. bluetoothd 5.66 would not answer AlreadyExists for
            // an LE bond of a device it also takes for BR/EDR (`pair_device` then picks BR/EDR,
            // whose bonding fails, and the `Pair` was never answered in the guest).
            if device.bonded { return .success(()) }
            // Checked and marked in one turn of the queue, where the cancellation runs too: a
            // `CancelPairing` is sent only after the `Pair` it cancels.
            guard !cancelled.withLock({ $0 }) else { return .failure(Self.cancelledPairing) }
            sent.withLock { $0 = true }
            do throws(BlueZError) {
                try await client.pair(id)
                return .success(())
            } catch  where error.code == .alreadyExists {
                return .success(())
            } catch {
                return .failure(Self.pairingError(error, cancelled: cancelled.withLock { $0 }))
            }
        } onCancel: { [self] in
            guard sent.withLock({ $0 }) else { return }
            do throws(BlueZError) { try await client.cancelPairing(id) } catch {
                BlueZLog.debug("CancelPairing: \(error)")
            }
        }
        try (outcome ?? .failure(Self.cancelledPairing)).get()
    }

    static let cancelledPairing = BluetoothError(
        .operationCancelled, message: "the pairing was cancelled (Device1.CancelPairing)")

    /// Core Bluetooth's code for an error of `Pair`, keeping bluetoothd's.
    static func pairingError(_ error: BlueZError, cancelled: Bool) -> BluetoothError {
        let (code, message): (BluetoothError.Code, String) =
            switch error.code {
            case .authenticationCanceled where cancelled, .cancelled: (.operationCancelled, cancelledPairing.message)
            case .authenticationFailed: (.pairingFailed, "pairing failed: a passkey or comparison did not match")
            case .authenticationRejected: (.pairingFailed, "pairing was rejected by an agent or the peripheral")
            case .authenticationCanceled:
                (.pairingFailed, "pairing was cancelled by an agent, or the link ended while pairing")
            case .authenticationTimeout, .timeout: (.encryptionTimedOut, "pairing timed out")
            case .connectionAttemptFailed: (.connectionFailed, "bluetoothd could not connect the peripheral to pair")
            case .inProgress: (.inProgress, "a pairing or connection of the peripheral is in progress already")
            default: Self.commonError(error)
            }
        return BluetoothError(code, message: "\(message) (\(error))", underlying: error)
    }

    /// The codes every call of these may meet.
    static func commonError(_ error: BlueZError) -> (BluetoothError.Code, String) {
        switch error.code {
        case .notConnected: (.notConnected, "the peripheral is not connected")
        case .unknownObject, .doesNotExist: (.unknownDevice, "bluetoothd no longer knows the peripheral")
        case .invalidArguments: (.invalidParameters, "bluetoothd refused the arguments")
        case .accessDenied: (.accessDenied, "the bus policy refused the call")
        case .serviceAbsent, .noReply, .disconnected: (.bluetoothUnavailable, "bluetoothd is away")
        case .notReady: (.bluetoothUnavailable, "the adapter is not powered")
        default: (.unknown, "bluetoothd refused")
        }
    }

    // MARK: Trust

    /// `Device1.Trusted` (any thread but the queue).
    func isTrusted(_ peripheral: Peripheral) -> Bool {
        busQueue.sync { client.device(peripheral.deviceID)?.trusted ?? false }
    }

    /// Sets `Device1.Trusted` (any thread but the queue); ``isTrusted(_:)`` reads the new value
    /// once this returns.
    func setTrusted(_ peripheral: Peripheral, _ trusted: Bool) async throws(BluetoothError) {
        let id = peripheral.deviceID
        let outcome = await runCancellable { [self] _ -> Result<Void, BluetoothError> in
            do throws(BlueZError) {
                try await client.setTrusted(id, trusted)
                return .success(())
            } catch {
                let (code, message) = Self.commonError(error)
                return .failure(BluetoothError(code, message: "\(message) (\(error))", underlying: error))
            }
        }
        try (outcome ?? .failure(BluetoothError(.operationCancelled))).get()
    }

    // MARK: Connecting by address

    /// `Adapter1.ConnectDevice`, one attempt (any thread but the queue): the peripheral, with its
    /// link the engine's, `didConnect` posted. A device this manager links already (pending or
    /// connected) is returned as it is, with no call. bluetoothd 5.68 and older refuse
    /// `ConnectDevice` for a device they know (`AlreadyExists`): then `Device1.Connect`, once.
    /// Cancelling the task returns nil at once; a link that still comes up is taken down.
    func connect(toAddress address: String, random: Bool) async -> Result<Peripheral, BluetoothError>? {
        await runCancellable { [self] cancelled -> Result<Peripheral, BluetoothError> in
            if let id = client.device(withAddress: address), links[id] != nil, let peripheral = peripherals[id] {
                return .success(peripheral)
            }
            guard !cancelled.withLock({ $0 }) else { return .failure(BluetoothError(.operationCancelled)) }
            let id: DeviceID
            do throws(BluetoothError) {
                id = try await connectDevice(address: address, random: random)
            } catch {
                return .failure(error)
            }
            await client.synchronize(with: id)
            guard let device = client.device(id) else {
                return .failure(BluetoothError(.unknownDevice, message: "bluetoothd removed \(address) at once"))
            }
            let peripheral = peripheral(for: id, device)
            guard links[id] == nil else { return .success(peripheral) }  // a request of connect(_:) meanwhile
            if cancelled.withLock({ $0 }) {
                try? await client.disconnect(id)
                return .failure(BluetoothError(.operationCancelled))
            }
            var link = Link()
            link.phase = .connected
            links[id] = link
            linkEndReasons[id] = nil
            peripheral.markConnecting()
            manager?.post(.link(peripheral, .connecting))
            manager?.post(.link(peripheral, .connected))
            if client.device(id)?.servicesResolved == true { servicesResolved(id) }
            return .success(peripheral)
        }
    }

    /// `ConnectDevice`, or (bluetoothd 5.68 and older, for a known device) `Connect`, on the queue.
    private func connectDevice(address: String, random: Bool) async throws(BluetoothError) -> DeviceID {
        do throws(BlueZError) {
            return try await client.connectDevice(address: address, random: random)
        } catch  where error.isMissingMethod {
            throw BluetoothError(
                .experimentalAPIUnavailable,
                message: "bluetoothd offers no Adapter1.ConnectDevice: connecting to an address it has not seen"
                    + " needs bluetoothd started with --experimental (-E) or Experimental = true in main.conf",
                underlying: error)
        } catch  where error.code == .alreadyExists {
            guard let known = client.device(withAddress: address) else {
                throw BluetoothError(.unknownDevice, message: "bluetoothd knows \(address) but has no device for it")
            }
            do throws(BlueZError) { try await client.connect(known, timeout: BlueZClient.connectDeviceTimeout) } catch {
                throw Self.connectionError(error)
            }
            return known
        } catch {
            let (code, message): (BluetoothError.Code, String) =
                error.code == .other || error.code == .failed
                ? (.connectionFailed, "bluetoothd could not connect \(address)") : Self.commonError(error)
            throw BluetoothError(code, message: "\(message) (\(error))", underlying: error)
        }
    }

    // MARK: Cancellation

    /// Runs `work` as a task on the bus queue and returns its result, or nil at once when the
    /// calling task is cancelled: then `work` finds its flag set, and `onCancel` runs on the bus
    /// queue (after `work` started or before; both see the flag in the queue's order).
    func runCancellable<T: Sendable>(
        _ work: @escaping @Sendable (_ cancelled: PosixMutex<Bool>) async -> Result<T, BluetoothError>,
        onCancel: @escaping @Sendable () async -> Void = {}
    ) async -> Result<T, BluetoothError>? {
        let cancelled = PosixMutex(false)
        let waiting = PosixMutex<CheckedContinuation<Result<T, BluetoothError>?, Never>?>(nil)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiting.withLock { $0 = continuation }
                onBusQueue {
                    let result = await work(cancelled)
                    waiting.withLock { $0.take() }?.resume(returning: result)
                }
            }
        } onCancel: {
            onBusQueue {
                cancelled.withLock { $0 = true }
                waiting.withLock { $0.take() }?.resume(returning: nil)
                await onCancel()
            }
        }
    }
}
