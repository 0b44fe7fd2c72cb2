public import Foundation

/// GATT operations. Each reports through the ``PeripheralDelegate`` on the
/// central manager's queue; on a peripheral that is not connected it fails
/// at once with ``BluetoothError`` `notConnected`.
extension Peripheral {
    /// Discovers the peripheral's services, all of them or those in `serviceUUIDs`.
    ///
    /// BlueZ resolves the whole database once per connection; this waits for
    /// `Device1.ServicesResolved` and filters the `GattService1` objects by UUID.
    public func discoverServices(_ serviceUUIDs: [BluetoothUUID]?) {
        perform { $0.discoverServices(self, filter: serviceUUIDs) }
    }

    /// Discovers the services included by `service`.
    public func discoverIncludedServices(_ includedServiceUUIDs: [BluetoothUUID]?, for service: Service) {
        perform { $0.discoverIncludedServices(self, service: service, filter: includedServiceUUIDs) }
    }

    /// Discovers the characteristics of `service`, all of them or those in `characteristicUUIDs`.
    public func discoverCharacteristics(_ characteristicUUIDs: [BluetoothUUID]?, for service: Service) {
        perform { $0.discoverCharacteristics(self, service: service, filter: characteristicUUIDs) }
    }

    /// Discovers the descriptors of `characteristic`.
    public func discoverDescriptors(for characteristic: Characteristic) {
        perform { $0.discoverDescriptors(self, characteristic: characteristic) }
    }

    /// Reads a characteristic's value (`GattCharacteristic1.ReadValue`); BlueZ handles long values.
    public func readValue(for characteristic: Characteristic) {
        perform { $0.read(self, characteristic: characteristic) }
    }

    /// Reads a descriptor's value (`GattDescriptor1.ReadValue`).
    public func readValue(for descriptor: Descriptor) {
        perform { $0.read(self, descriptor: descriptor) }
    }

    /// Writes a characteristic's value (`WriteValue` with type `request`; without response
    /// through `AcquireWrite`'s socket, or `WriteValue` with type `command`).
    ///
    /// With `.withResponse` the delegate's `didWriteValueFor` follows the
    /// peripheral's answer; `.withoutResponse` reports nothing (see
    /// ``canSendWriteWithoutResponse``). Writes reach bluetoothd in the order they were made.
    public func writeValue(_ data: Data, for characteristic: Characteristic, type: CharacteristicWriteType) {
        guard type == .withoutResponse else {
            return perform { engine in
                engine.write(self, data: data, characteristic: characteristic, withResponse: true)
            }
        }
        perform(handingOverAWrite: true) { engine in
            engine.write(self, data: data, characteristic: characteristic, withResponse: false)
            if self.writeTaken() { engine.manager?.post(.gatt(self, .readyToSendWriteWithoutResponse)) }
        }
    }

    /// Writes a descriptor's value (`GattDescriptor1.WriteValue`).
    public func writeValue(_ data: Data, for descriptor: Descriptor) {
        perform { engine in engine.write(self, data: data, descriptor: descriptor) }
    }

    /// Turns notifications (or indications) on or off.
    ///
    /// Notifications use `AcquireNotify` where bluetoothd offers it (a socket that carries each
    /// value, released by closing it), `StartNotify` / `StopNotify` otherwise — indications
    /// always. Values then arrive through `peripheral(_:didUpdateValueFor:error:)`, after
    /// `peripheral(_:didUpdateNotificationStateFor:error:)`; a subscription ends with the link.
    public func setNotifyValue(_ enabled: Bool, for characteristic: Characteristic) {
        perform { $0.setNotify(self, enabled: enabled, characteristic: characteristic) }
    }

    /// Reports the last signal strength bluetoothd received from the peripheral (`Device1.RSSI`).
    ///
    /// BlueZ has no RSSI request for a connected LE link; it reports the RSSI
    /// of advertisements, and this manager remembers the last one it saw.
    /// When it has seen none, the delegate gets ``BluetoothError`` `operationNotSupported`.
    ///
    /// Answers are paced like a radio's: at most one every 50 ms for a peripheral (Core
    /// Bluetooth's take a connection event or more). Code that reads again from
    /// `peripheral(_:didReadRSSI:error:)` to follow the signal would otherwise spin.
    public func readRSSI() {
        let delay = rssiReadDelay(now: .now())
        guard let engine else { return }
        engine.busQueue.asyncAfter(deadline: .now() + delay) { [self] in
            let rssi = engine.lastRSSI(of: self)
            let error =
                rssi == nil
                ? BluetoothError(.operationNotSupported, message: "bluetoothd has no RSSI for this device now") : nil
            engine.manager?.post(.gatt(self, .rssi(Int(rssi ?? 0), error)))
        }
    }

    /// The largest value one write of `type` can carry: the negotiated ATT MTU
    /// minus 3 (23 − 3 = 20 before BlueZ reports an MTU), at most 512 (an attribute value's
    /// maximum: bluetoothd's GATT server drops a longer write command without a word, so with
    /// BlueZ's MTU of 517 a write of MTU − 3 = 514 bytes would be lost); 512 for long writes
    /// with response. A peripheral running bluetoothd 5.68 or older refuses 511 and 512 bytes
    /// too (it counts the attribute handle into its check, fixed in 5.69): the peer's version is
    /// not known here, so write at most 510 bytes to a BlueZ peripheral of unknown age.
    public func maximumWriteValueLength(for type: CharacteristicWriteType) -> Int {
        let mtu = engine?.mtu(of: self) ?? 23
        return type == .withResponse ? 512 : min(512, max(20, mtu - 3))
    }

    /// Runs `body` on the bus queue, when the peripheral still has its manager. A write without
    /// response is counted as handed over before it is posted (``canSendWriteWithoutResponse``
    /// says false while too many wait for the bus queue); `body` reports it taken.
    private func perform(handingOverAWrite: Bool = false, _ body: @escaping @Sendable (CentralEngine) -> Void) {
        guard let engine else { return }
        if handingOverAWrite { writeHandedOver() }
        engine.busQueue.async { body(engine) }
    }
}
