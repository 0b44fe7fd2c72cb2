internal import DBus

/// bluetoothd's temporary timer (`src/device.c` 5.66, the same in 5.82): a device discovered but
/// never connected or paired is removed `TemporaryTimeout` after it was last seen
/// (``SimulatedBlueZ/Options/temporaryTimeout``).
///
/// bluetoothd arms one timer per device; here every restart appends its deadline to one queue, in
/// deadline order (the timeout is fixed), served by one timer at a time. An entry whose device was
/// seen again since, connected, or stopped being temporary is dropped when its turn comes.
extension SimulatorCore {
    /// The deadlines of the temporary timers, oldest first.
    struct TemporaryTimers {
        var entries: [(path: ObjectPath, deadline: ContinuousClock.Instant)] = []
        /// The index of the oldest entry still to serve.
        var head = 0
        /// Whether a timer for the oldest entry is scheduled.
        var armed = false
    }

    /// `device_update_last_seen`: an advertisement or a disconnection restarts a temporary device's timer.
    func deviceLastSeen(_ path: ObjectPath) {
        guard devices[path]?.temporary == true else { return }
        setTemporaryTimer(path)
    }

    /// `btd_device_set_temporary`: a device that stops being temporary loses its timer; one that
    /// becomes temporary (`RemoveDevice` of a connected device) gets one.
    ///
    /// bluetoothd ignores the call for a private address (random, not static: its two top bits
    /// are not both set), so a connection leaves such a device temporary, and its timer starts
    /// again when it disconnects. Pairing is not held to that here (`byPairing`): it gives
    /// bluetoothd the identity address, which the simulator does not model.
    func setTemporary(_ path: ObjectPath, _ temporary: Bool, byPairing: Bool = false) {
        guard let device = devices[path], device.temporary != temporary else { return }
        if !byPairing, Self.isPrivate(device) { return }
        updateDevice(path) { $0.temporary = temporary }
        if temporary { setTemporaryTimer(path) } else { clearTemporaryTimer(path) }
    }

    /// `device_address_is_private`: a random address that is not static (top bits `11`).
    static func isPrivate(_ device: DeviceState) -> Bool {
        guard device.addressType == .random, let top = UInt8(device.address.prefix(2), radix: 16) else { return false }
        return top >> 6 != 0b11
    }

    /// `clear_temporary_timer` (a connection, or the device stopped being temporary).
    func clearTemporaryTimer(_ path: ObjectPath) {
        updateDevice(path) { $0.temporaryDeadline = nil }
    }

    /// `set_temporary_timer(dev, btd_opts.tmpto)`: no timer when the timeout is nil or zero.
    private func setTemporaryTimer(_ path: ObjectPath) {
        guard let timeout = options.temporaryTimeout, timeout > .zero else { return }
        let deadline = ContinuousClock.now + timeout
        updateDevice(path) { $0.temporaryDeadline = deadline }
        temporaryTimers.entries.append((path, deadline))
        armTemporaryTimer()
    }

    /// Schedules the timer of the oldest entry, unless one is scheduled or there is none.
    private func armTemporaryTimer() {
        guard !temporaryTimers.armed, temporaryTimers.head < temporaryTimers.entries.count else { return }
        temporaryTimers.armed = true
        let delay = temporaryTimers.entries[temporaryTimers.head].deadline - ContinuousClock.now
        after(max(delay, .zero)) { self.temporaryTimersFired() }
    }

    /// `device_disappeared`: removes every device whose timer ran out (`btd_adapter_remove_device`).
    private func temporaryTimersFired() {
        temporaryTimers.armed = false
        let now = ContinuousClock.now
        while temporaryTimers.head < temporaryTimers.entries.count {
            let (path, deadline) = temporaryTimers.entries[temporaryTimers.head]
            guard deadline <= now else { break }
            temporaryTimers.head += 1
            // Only the device's latest deadline counts: it was seen again, connected or kept otherwise.
            guard let device = devices[path], device.temporaryDeadline == deadline, device.temporary,
                !device.connected
            else { continue }
            removeDeviceObject(path, forget: true)
        }
        // Served entries go once they are half of the queue (amortized constant time per entry).
        if temporaryTimers.head == temporaryTimers.entries.count {
            temporaryTimers.entries.removeAll(keepingCapacity: true)
            temporaryTimers.head = 0
        } else if temporaryTimers.head > 64 && temporaryTimers.head * 2 >= temporaryTimers.entries.count {
            temporaryTimers.entries.removeFirst(temporaryTimers.head)
            temporaryTimers.head = 0
        }
        armTemporaryTimer()
    }
}
