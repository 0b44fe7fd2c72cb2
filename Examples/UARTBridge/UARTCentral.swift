import BlueZKit
import Dispatch
import Foundation
import HeartRateProfile
import UARTProfile

/// The central side of the bridge: finds a Nordic UART peripheral, connects, sends it the test
/// pattern — through RX with writes without response (`--mode gatt`), through the L2CAP
/// channel whose PSM the peripheral serves (`--mode l2cap`), or both in turn on one connection
/// (`--mode both`) — checks the echo byte for byte and prints the throughput. Exits 0 only when
/// every byte came back intact.
///
/// GATT flow control as on Apple's platforms: write while `canSendWriteWithoutResponse`, go on
/// from `peripheralIsReady(toSendWriteWithoutResponse:)`; each write as long as
/// `maximumWriteValueLength(for: .withoutResponse)` allows (but see
/// ``UARTProfile/maximumWriteLength``), a ``UARTFrame`` (bluetoothd may reorder writes and
/// notifications over its Enhanced ATT bearers; the frames' offsets put the echo back in
/// order). Linux: `canSendWriteWithoutResponse` turns false only once BlueZKit's bus queue has
/// taken the writes, so the loop writes a burst at a time and lets the queue turn in between.
///
/// Everything runs on `queue` (delegate calls; the channel transfer hops back to it), so the
/// mutable state needs no lock — the invariant behind `@unchecked Sendable`.
final class UARTCentral: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    struct Configuration {
        var adapter: String?
        var name: String?
        /// The transfers to make, in turn.
        var modes = [BridgeOptions.Mode.gatt]
        var bytes = 65_536
        /// The longest write (GATT mode); nil for the peripheral's maximum.
        var chunk: Int?
        var stallTimeout: Duration = .seconds(30)
        var pattern = TestPattern()
    }

    let queue = DispatchQueue(label: "uart-bridge.central")
    private let configuration: Configuration
    private let output: EventOutput
    private var manager: CentralManager!
    /// The peripheral we use; kept strongly, as Core Bluetooth requires.
    private var uart: Peripheral?
    private var rx: Characteristic?
    private var tx: Characteristic?
    private var psmCharacteristic: Characteristic?
    /// Which of the configured modes runs now.
    private var modeIndex = 0
    private var mode: BridgeOptions.Mode { configuration.modes[modeIndex] }
    /// The open channel (L2CAP mode); kept strongly.
    private var channel: L2CAPChannel?

    // The GATT transfer.
    private var chunker: PatternChunker
    private var verifier: FrameVerifier
    private var started: ContinuousClock.Instant?
    private var allSent: ContinuousClock.Instant?
    private var lastProgress = ContinuousClock.now
    /// How often the writes had to wait for `peripheralIsReady(toSendWriteWithoutResponse:)`.
    private var waits = 0
    /// The most bytes written and not yet echoed at any time.
    private var mostInFlight = 0
    /// Bytes that came back intact through the channel (L2CAP mode).
    private var channelReceived = 0
    private var watchdog: (any DispatchSourceTimer)?
    /// A `send()` waits on the queue.
    private var scheduled = false
    private var finished = false

    init(configuration: Configuration, output: EventOutput) {
        self.configuration = configuration
        self.output = output
        chunker = PatternChunker(pattern: configuration.pattern, total: configuration.bytes)
        verifier = FrameVerifier(pattern: configuration.pattern, expected: configuration.bytes)
    }

    func start() {
        queue.async {
            self.manager = CentralManager(
                delegate: self, queue: self.queue, options: CentralManagerOptions(adapter: self.configuration.adapter))
        }
    }

    /// Closes the channel and disconnects; `done` runs on `queue`.
    func stop(_ done: @escaping @Sendable () -> Void) {
        queue.async {
            self.channel?.close()
            if let uart = self.uart { self.manager.cancelPeripheralConnection(uart) }
            self.queue.asyncAfter(deadline: .now() + .milliseconds(300), execute: done)
        }
    }

    // MARK: CentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CentralManager) {
        output.emit("state", ["state": "\(central.state)"], human: "Bluetooth is \(central.state)")
        guard central.state == .poweredOn, uart == nil else { return }
        central.scanForPeripherals(withServices: [UARTProfile.service], options: nil)
        output.emit("scanning", [:], human: "Scanning for the Nordic UART Service…")
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
        rssi RSSI: Int
    ) {
        let name = advertisementData.localName ?? peripheral.name
        guard uart == nil else { return }
        if let wanted = configuration.name, wanted != name { return }
        output.emit(
            "discovered", ["id": peripheral.identifier.uuidString, "name": name ?? "", "rssi": RSSI],
            human: "Found \(name ?? "an unnamed peripheral") (\(peripheral.identifier.uuidString))")
        central.stopScan()
        uart = peripheral
        peripheral.delegate = self
        central.connect(peripheral)
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        output.emit("connected", ["id": peripheral.identifier.uuidString], human: "Connected")
        peripheral.discoverServices([UARTProfile.service])
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        fail("cannot connect: \(error.map { "\($0)" } ?? "unknown error")")
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        guard !finished else { return }
        fail(
            "the link dropped\(error.map { ": \($0)" } ?? "") after \(echoed) of \(configuration.bytes) bytes came back"
        )
    }

    // MARK: PeripheralDelegate

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        if let error { return fail("service discovery failed: \(error)") }
        guard let service = peripheral.services?.first(where: { $0.uuid == UARTProfile.service }) else {
            return fail("the peripheral has no Nordic UART Service")
        }
        peripheral.discoverCharacteristics([UARTProfile.rx, UARTProfile.tx, UARTProfile.psm], for: service)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        if let error { return fail("characteristic discovery failed: \(error)") }
        let characteristics = service.characteristics ?? []
        func find(_ uuid: BluetoothUUID) -> Characteristic? { characteristics.first { $0.uuid == uuid } }
        rx = find(UARTProfile.rx)
        tx = find(UARTProfile.tx)
        psmCharacteristic = find(UARTProfile.psm)
        beginTransfer()
    }

    /// Sets up the transfer of the current mode: subscribes to TX, or reads the PSM.
    private func beginTransfer() {
        guard let uart else { return }
        switch mode {
        case .gatt:
            guard let rx, rx.properties.contains(.writeWithoutResponse), let tx, tx.properties.contains(.notify) else {
                return fail("the UART service lacks RX (write without response) or TX (notify)")
            }
            // The echo comes back through TX: subscribe before sending anything.
            if tx.isNotifying {
                startTransfer(chunkLength: writeLength(uart))
                send()
            } else {
                uart.setNotifyValue(true, for: tx)
            }
        case .l2cap:
            guard let psmCharacteristic else {
                return fail("the UART service has no L2CAP PSM characteristic (the peripheral has no channel)")
            }
            uart.readValue(for: psmCharacteristic)
        }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error { return fail("subscribing to TX failed: \(error)") }
        guard characteristic.uuid == UARTProfile.tx, characteristic.isNotifying, mode == .gatt, started == nil else {
            return
        }
        startTransfer(chunkLength: writeLength(peripheral))
        send()
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if let error { return fail("reading \(characteristic.uuid) failed: \(error)") }
        guard let value = characteristic.value else { return }
        switch characteristic.uuid {
        case UARTProfile.psm:
            guard let psm = UARTProfile.decodePSM(value) else {
                return fail("the PSM characteristic holds \(value.count) bytes, not 2")
            }
            output.emit("psm", ["psm": Int(psm)], human: "Opening the L2CAP channel on PSM 0x\(String(psm, radix: 16))")
            peripheral.openL2CAPChannel(psm)
        case UARTProfile.tx:
            received(value)
        default:
            break
        }
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        send()
    }

    func peripheral(_ peripheral: Peripheral, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        guard let channel else { return fail("cannot open the L2CAP channel: \(error.map { "\($0)" } ?? "?")") }
        self.channel = channel
        startTransfer(chunkLength: channel.maximumWriteLength)
        let transfer = ChannelTransfer(
            channel: channel, pattern: configuration.pattern, bytes: configuration.bytes)
        Task {
            let outcome = await transfer.run { received in self.queue.async { self.progress(received) } }
            self.queue.async { self.channelFinished(outcome) }
        }
    }

    // MARK: The transfer

    private func startTransfer(chunkLength: Int) {
        started = .now
        lastProgress = .now
        output.emit(
            "sending",
            ["mode": mode.rawValue, "bytes": configuration.bytes, "chunk": chunkLength],
            human: "Sending \(configuration.bytes) bytes "
                + (mode == .gatt
                    ? "through RX (writes without response of up to \(chunkLength) bytes)"
                    : "through the L2CAP channel (SDUs of up to \(chunkLength) bytes)"))
        startWatchdog()
    }

    /// Writes without response while the peripheral can take them, a burst per turn of the
    /// queue; the rest waits for `peripheralIsReady(toSendWriteWithoutResponse:)`.
    private func send() {
        guard let uart, let rx, !finished, mode == .gatt, started != nil, !scheduled else { return }
        var burst = 0
        while burst < Self.burst, uart.canSendWriteWithoutResponse,
            let frame = chunker.nextFrame(maximumLength: writeLength(uart))
        {
            uart.writeValue(frame, for: rx, type: .withoutResponse)
            burst += 1
            mostInFlight = max(mostInFlight, chunker.offset - verifier.received)
        }
        if chunker.isFinished {
            if allSent == nil { allSent = .now }
        } else if uart.canSendWriteWithoutResponse {
            // Let the bus queue take the burst (and echoes arrive) before the next one.
            scheduled = true
            queue.async {
                self.scheduled = false
                self.send()
            }
        } else {
            waits += 1
        }
    }

    /// Writes sent before the queue turns (see the type's notes).
    private static let burst = 8

    /// How long a write may be: what the link takes, at most what bluetoothd's GATT server
    /// accepts, or less when `--chunk` says so.
    private func writeLength(_ peripheral: Peripheral) -> Int {
        min(
            peripheral.maximumWriteValueLength(for: .withoutResponse), UARTProfile.maximumWriteLength,
            configuration.chunk ?? .max)
    }

    /// An echo notification: a frame, checked against the pattern.
    private func received(_ value: Data) {
        guard !finished else { return }
        switch verifier.consume(value) {
        case .failed(let failure): fail("the echo is wrong: \(failure)")
        case .complete: succeed()
        case .incomplete: lastProgress = .now
        }
    }

    /// The channel transfer's reader reports how far the echo got (for the stall watchdog).
    private func progress(_ received: Int) {
        channelReceived = received
        lastProgress = .now
    }

    /// Bytes that came back intact so far, in either mode.
    private var echoed: Int { mode == .gatt ? verifier.received : channelReceived }

    private func channelFinished(_ outcome: ChannelTransfer.Outcome) {
        guard !finished else { return }
        allSent = outcome.allSent
        switch outcome.status {
        case .complete: succeed()
        case .failed(let failure): fail("the echo is wrong: \(failure)")
        case .incomplete:
            fail(
                "the channel ended after \(outcome.received) of \(configuration.bytes) bytes: \(outcome.error.map { "\($0)" } ?? "closed")"
            )
        }
    }

    private func succeed() {
        let end = ContinuousClock.now
        let start = started ?? end
        let roundTrip = Throughput(bytes: configuration.bytes, from: start, to: end)
        let up = Throughput(bytes: configuration.bytes, from: start, to: allSent ?? end)
        var fields: [String: any Sendable] = [
            "mode": mode.rawValue, "bytes": configuration.bytes, "intact": true,
            "seconds": roundTrip.seconds, "bytesPerSecond": roundTrip.bytesPerSecond,
            "sentSeconds": up.seconds, "sentBytesPerSecond": up.bytesPerSecond,
        ]
        var reordered = ""
        if mode == .gatt {
            fields["writeWaits"] = waits
            fields["mostInFlight"] = mostInFlight
            fields["frames"] = verifier.frames
            fields["framesOutOfOrder"] = verifier.framesOutOfOrder
            reordered = "; \(verifier.framesOutOfOrder) of \(verifier.frames) frames came back out of order"
        }
        output.emit(
            "result", fields,
            human: "\(mode == .gatt ? "GATT" : "L2CAP") echo intact: \(configuration.bytes) bytes there and back in "
                + "\(roundTrip.secondsDescription), \(roundTrip) round trip (sent in \(up.secondsDescription), "
                + "\(up))\(reordered)")
        guard modeIndex + 1 < configuration.modes.count else { return finish(status: 0) }
        // The next mode, on the same connection, from scratch.
        modeIndex += 1
        chunker = PatternChunker(pattern: configuration.pattern, total: configuration.bytes)
        verifier = FrameVerifier(pattern: configuration.pattern, expected: configuration.bytes)
        (started, allSent, waits, mostInFlight, channelReceived) = (nil, nil, 0, 0, 0)
        watchdog?.cancel()
        beginTransfer()
    }

    private func fail(_ message: String) {
        guard !finished else { return }
        output.error(message)
        finish(status: 1)
    }

    private func finish(status: Int32) {
        finished = true
        watchdog?.cancel()
        stop { exit(status) }
    }

    /// Fails the run when the echo makes no progress for the stall timeout.
    private func startWatchdog() {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .seconds(1), repeating: .seconds(1))
        timer.setEventHandler { [weak self] in
            guard let self, !self.finished, ContinuousClock.now - self.lastProgress > self.configuration.stallTimeout
            else { return }
            self.fail(
                "no echo for \(self.configuration.stallTimeout): \(self.echoed) of "
                    + "\(self.configuration.bytes) bytes came back")
        }
        timer.resume()
        watchdog = timer
    }
}
