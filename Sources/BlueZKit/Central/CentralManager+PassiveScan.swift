import BlueZ
import Foundation

/// Linux: passive scanning (``ScanOptions/passive``), with a form that reports whether it started.
extension CentralManager {
    /// Linux: starts a passive scan and returns once bluetoothd runs it, or throws why it cannot.
    ///
    /// The same scan as ``scanForPeripherals(withServices:options:)-(_,ScanOptions)`` with
    /// ``ScanOptions/passive`` set: discoveries arrive through
    /// ``CentralManagerDelegate/centralManager(_:didDiscover:advertisementData:rssi:)-(_,_,[String:Any],_)`` on the
    /// manager's queue and through ``discoveries()``, and ``stopScan()`` ends it. It exports an
    /// `org.bluez.AdvertisementMonitor1` object (type `or_patterns`, the patterns, the RSSI
    /// thresholds) and calls `AdvertisementMonitorManager1.RegisterMonitor` on the adapter;
    /// it returns when bluetoothd calls the monitor's `Activate`. Peripherals that advertise
    /// none of `serviceUUIDs` (when given) are left out, as in an active scan.
    ///
    /// - Throws: ``BluetoothError`` with
    ///   - ``BluetoothError/Code/advertisementMonitorUnavailable`` when the adapter has no
    ///     `AdvertisementMonitorManager1`: bluetoothd runs without `--experimental` (`-E`);
    ///   - ``BluetoothError/Code/invalidParameters`` when `options.passive` is nil, or
    ///     bluetoothd refuses the monitor (it calls `Release` instead of `Activate`);
    ///   - ``BluetoothError/Code/bluetoothUnavailable`` unless the state is `.poweredOn`, or
    ///     when bluetoothd or the adapter goes away before the monitor runs;
    ///   - ``BluetoothError/Code/operationCancelled`` when ``stopScan()`` or another scan
    ///     replaces this one before it runs, or the calling task is cancelled (which stops the
    ///     scan, as ``stopScan()`` does).
    ///   The scan is not running after any of these.
    public func scanPassively(withServices serviceUUIDs: [BluetoothUUID]?, options: ScanOptions)
        async throws(BluetoothError)
    {
        guard options.passive != nil else {
            throw BluetoothError(.invalidParameters, message: "ScanOptions.passive is nil: this is no passive scan")
        }
        let (engine, state) = shared.withLock { ($0.engine, $0.state) }
        guard let engine, state == .poweredOn else {
            throw BluetoothError(.bluetoothUnavailable, message: "the state is \(state), not poweredOn")
        }
        shared.withLock { state in
            state.isScanning = true
            state.scan = CentralRestorationRecord.Scan(services: serviceUUIDs, options: options)
        }
        saveStateSoon()
        let failure: BluetoothError? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                engine.startPassiveScan(services: serviceUUIDs, options: options) { error in
                    continuation.resume(returning: error)
                }
            }
        } onCancel: {
            // As stopScan(): the scan is retired, and the wait ends with operationCancelled.
            self.stopScan()
        }
        guard let failure else { return }
        // Not running (unless another scan replaced this one): so the caller sees it at once.
        if failure.code != .operationCancelled {
            shared.withLock { state in
                state.isScanning = false
                state.scan = nil
                state.scanToResume = nil
            }
            saveStateSoon()
        }
        throw failure
    }

    /// The passive scan could not start or was refused: no longer scanning (from the bus queue).
    func passiveScanEnded() {
        queue.async { [self] in
            shared.withLock { state in
                state.isScanning = false
                state.scan = nil
            }
            saveState()
        }
    }
}
