import BlueZ

/// Reads sent a second time when bluetoothd failed the first on its own, during the pairing the
/// read started.
extension CentralEngine {
    /// Reads `attribute` with `ReadValue`, and once more when the first read failed with ATT
    /// 0x0E (Unlikely Error) while our link is still up.
    ///
    /// A read of a characteristic that needs encryption is answered by the peripheral with
    /// Insufficient Authentication or Encryption; bluetoothd (`src/shared/att.c`, 5.66 to at least
    /// 5.87) then asks the kernel for security, which starts the pairing and holds the ATT socket
    /// until the link is encrypted, and queues the read again. When its event loop saw the socket
    /// writable in the same wake-up that brought the error response, it writes the queued read at
    /// once into the held socket: the write fails (`write failed: Transport endpoint is not
    /// connected` in bluetoothd's log), and the read is failed with Unlikely Error while the pairing
    /// goes on and succeeds. Seen in 1 of 30 pairing reads against a Bumble peripheral in the
    /// emulated environment (bluetoothd 5.87, 2026-12-07), and in CI on 5.82. Core Bluetooth reads
    /// the value after the pairing, so this read is sent again: bluetoothd holds it until the
    /// pairing ends and sends it on the encrypted link. A peripheral that answers 0x0E itself
    /// gets the read twice and the app its second answer (the first error when the second read
    /// got no ATT answer: a bearer bluetoothd shut after its ATT timeout, a D-Bus timeout); a link
    /// that ended is not read again (``operationError(_:of:)`` explains its error). Writes are not
    /// sent again: a second write could overtake the writes sent after it. In a task on the bus
    /// queue (``onBusQueue(_:)``).
    func readValue(_ attribute: AttributeID, descriptor: Bool, of peripheral: Peripheral) async throws(BlueZError)
        -> [UInt8]
    {
        dispatchPrecondition(condition: .onQueue(busQueue))
        do throws(BlueZError) {
            return try await client.readValue(attribute, descriptor: descriptor)
        } catch {
            guard (Self.gattError(error) as? ATTError)?.code == .unlikelyError else { throw error }
            await client.synchronize(with: peripheral.deviceID)
            guard links[peripheral.deviceID]?.phase == .connected else { throw error }
            BlueZLog.debug("a read failed with ATT 0x0E on a connected link: reading once more")
            do throws(BlueZError) {
                return try await client.readValue(attribute, descriptor: descriptor)
            } catch let again {
                // An ATT answer to the second read says more; a bearer that is gone (the ATT
                // timeout shuts it) or a call that timed out says less than the first error.
                throw ATTError(bluez: again) != nil ? again : error
            }
        }
    }
}
