/// A fault for the per-central notify sockets of bluetoothd 5.82: a full socket.
extension SimulatedCentral {
    /// The central's notify sockets stall: bluetoothd stops reading the sockets applications
    /// handed it for this central (``SimulatedBlueZ/Version/bluez5_82``), so what the application
    /// writes piles up until the socket is full and its sends would block; the central receives
    /// nothing meanwhile. When the central unsubscribes or its link ends, `Device1` says so at once
    /// but the socket closes only when the stall ends (``resumeNotifySockets()``): bluetoothd
    /// hears of a link's end from the kernel's management socket and sees the hang-up of the
    /// link's ATT socket separately, in either order, and a busy bluetoothd sees the hang-up last.
    ///
    /// Sockets opened while stalled stall too. The stall outlives a bluetoothd restart (as injected
    /// faults do); sockets are not closed by it.
    public func stallNotifySockets() {
        core?.stallNotifySockets(address: address)
    }

    /// Ends ``stallNotifySockets()``: bluetoothd reads the central's sockets again (what piled up
    /// reaches the central) and closes those whose subscription or link ended meanwhile.
    public func resumeNotifySockets() {
        core?.resumeNotifySockets(address: address)
    }
}
