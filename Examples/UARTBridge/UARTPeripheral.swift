import BlueZKit
import Dispatch
import Foundation
import HeartRateProfile
import UARTProfile

/// The peripheral side of the bridge: publishes an L2CAP channel, then the Nordic UART Service
/// with RX, TX and the channel's PSM (Apple's PSM characteristic), advertises, and echoes
/// everything a central sends — RX writes come back as TX notifications, channel data on the
/// channel.
///
/// Each RX write goes back as it came, in one notification (the central's frames stay whole;
/// see ``UARTFrame``), in the order the writes arrived. Flow control on the way back: when
/// `updateValue` returns false the chunk stays queued (``EchoQueue``) and goes out from
/// `peripheralManagerIsReady(toUpdateSubscribers:)`; nothing is dropped. Channel echoes are
/// paced by the kernel's credits (`write` waits).
///
/// Everything runs on `queue` (delegate calls, and the channel tasks hop back to it to
/// report), so the mutable state needs no lock — the invariant behind `@unchecked Sendable`.
final class UARTPeripheral: PeripheralManagerDelegate, @unchecked Sendable {
    struct Configuration {
        var adapter: String?
        var name = UARTProfile.defaultName
    }

    /// What one central sent through RX and what went back.
    private struct Session {
        /// The central as the latest write described it (its MTU included).
        var central: Central
        var pending = EchoQueue()
        var received = 0
        var echoed = 0
        /// How often `updateValue` said "not now".
        var waits = 0
        var firstWrite: ContinuousClock.Instant
        var lastEcho: ContinuousClock.Instant
    }

    let queue = DispatchQueue(label: "uart-bridge.peripheral")
    private let configuration: Configuration
    private let output: EventOutput
    private var manager: PeripheralManager!
    private let rx = MutableCharacteristic(
        type: UARTProfile.rx, properties: [.write, .writeWithoutResponse], value: nil, permissions: [.writeable])
    private let tx = MutableCharacteristic(type: UARTProfile.tx, properties: [.notify], value: nil, permissions: [])
    private var started = false
    private var psm: L2CAPPSM?
    private var sessions: [UUID: Session] = [:]
    /// `updateValue` said "not now": wait for `peripheralManagerIsReady` before sending more.
    private var waitingForReady = false
    /// Open channels, kept strongly (a released channel closes).
    private var channels: [ObjectIdentifier: L2CAPChannel] = [:]

    init(configuration: Configuration, output: EventOutput) {
        self.configuration = configuration
        self.output = output
    }

    /// Creates the manager; everything else follows from its delegate calls.
    func start() {
        queue.async {
            self.manager = PeripheralManager(
                delegate: self, queue: self.queue,
                options: PeripheralManagerOptions(adapter: self.configuration.adapter))
        }
    }

    /// Closes the channels, stops advertising and unpublishes; `done` runs on `queue`.
    func stop(_ done: @escaping @Sendable () -> Void) {
        queue.async {
            for channel in self.channels.values { channel.close() }
            self.manager?.stopAdvertising()
            self.manager?.removeAllServices()
            if let psm = self.psm { self.manager?.unpublishL2CAPChannel(psm) }
            // The calls above are asynchronous; give them a moment to reach bluetoothd.
            self.queue.asyncAfter(deadline: .now() + .milliseconds(300), execute: done)
        }
    }

    // MARK: Publishing

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        output.emit("state", ["state": "\(peripheral.state)"], human: "Bluetooth is \(peripheral.state)")
        guard peripheral.state == .poweredOn, !started else { return }
        started = true
        // The channel first: its PSM goes into the service.
        peripheral.publishL2CAPChannel(withEncryption: false)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?) {
        if let error {
            // No kernel Bluetooth sockets (a container, the simulated BlueZ): GATT still works.
            output.emit(
                "l2capUnavailable", ["message": "\(error)"], human: "No L2CAP channel (\(error)); GATT mode only")
        } else {
            psm = PSM
            output.emit(
                "l2capPublished", ["psm": Int(PSM)], human: "L2CAP channel published on PSM 0x\(String(PSM, radix: 16))"
            )
        }
        let service = MutableService(type: UARTProfile.service, primary: true)
        var characteristics = [rx, tx]
        if let psm {
            characteristics.append(
                MutableCharacteristic(
                    type: UARTProfile.psm, properties: [.read], value: UARTProfile.encode(psm: psm),
                    permissions: [.readable]))
        }
        service.characteristics = characteristics
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        if let error { return output.error("could not publish the UART service: \(error)") }
        peripheral.startAdvertising([
            CBAdvertisementDataLocalNameKey: configuration.name,
            CBAdvertisementDataServiceUUIDsKey: [UARTProfile.service],
        ])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        if let error { return output.error("could not advertise: \(error)") }
        output.emit(
            "advertising", ["name": configuration.name],
            human: "Advertising \"\(configuration.name)\" with the Nordic UART Service")
    }

    // MARK: GATT echo

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
    ) {
        output.emit(
            "subscribed", ["central": central.identifier.uuidString, "characteristic": "\(characteristic.uuid)"],
            human: "Central \(central.identifier.uuidString) subscribed to TX")
        // What it wrote before it subscribed goes back now.
        flush()
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: MutableCharacteristic
    ) {
        guard let session = sessions.removeValue(forKey: central.identifier) else {
            return output.emit(
                "unsubscribed", ["central": central.identifier.uuidString, "received": 0, "echoed": 0],
                human: "Central \(central.identifier.uuidString) unsubscribed from TX")
        }
        let rate = Throughput(bytes: session.echoed, from: session.firstWrite, to: session.lastEcho)
        output.emit(
            "unsubscribed",
            [
                "central": central.identifier.uuidString, "received": session.received, "echoed": session.echoed,
                "seconds": rate.seconds, "bytesPerSecond": rate.bytesPerSecond, "updateWaits": session.waits,
            ],
            human: "Central \(central.identifier.uuidString) unsubscribed: received \(session.received) bytes, "
                + "echoed \(session.echoed) (\(rate); updateValue pushed back \(session.waits) times)")
        waitingForReady = false
        flush()
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        for request in requests where request.characteristic != rx {
            return peripheral.respond(to: first, withResult: .writeNotPermitted)
        }
        for request in requests {
            guard let value = request.value, !value.isEmpty else { continue }
            let id = request.central.identifier
            var session =
                sessions[id]
                ?? Session(central: request.central, firstWrite: .now, lastEcho: .now)
            if session.received == 0 {
                output.emit(
                    "receiving", ["central": id.uuidString, "mtu": request.central.maximumUpdateValueLength + 3],
                    human: "Echoing what \(id.uuidString) writes, in notifications of up to "
                        + "\(min(request.central.maximumUpdateValueLength, UARTProfile.maximumValueLength)) bytes")
            }
            session.central = request.central
            session.pending.append(value)
            session.received += value.count
            sessions[id] = session
        }
        // A write with response waits for this (bluetoothd 5.66–5.87 acknowledged it already:
        // RX has both write kinds); a write without response ignores it.
        peripheral.respond(to: first, withResult: .success)
        flush()
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        waitingForReady = false
        flush()
    }

    /// Sends what waits, in notifications as long as each central takes, until the manager
    /// pushes back; what it refused stays queued for `peripheralManagerIsReady`.
    private func flush() {
        guard !waitingForReady, let manager else { return }
        let subscribed = Set((tx.subscribedCentrals ?? []).map(\.identifier))
        for id in sessions.keys where subscribed.contains(id) {
            guard var session = sessions[id] else { continue }
            defer { sessions[id] = session }
            let length = min(session.central.maximumUpdateValueLength, UARTProfile.maximumValueLength)
            while let chunk = session.pending.front(maximumLength: length) {
                guard manager.updateValue(chunk, for: tx, onSubscribedCentrals: [session.central]) else {
                    session.waits += 1
                    waitingForReady = true
                    return
                }
                session.pending.removeFront(chunk.count)
                session.echoed += chunk.count
                session.lastEcho = .now
            }
        }
    }

    // MARK: L2CAP echo

    func peripheralManager(_ peripheral: PeripheralManager, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        guard let channel else {
            return output.error("a central could not open the channel: \(error.map { "\($0)" } ?? "?")")
        }
        let key = ObjectIdentifier(channel)
        channels[key] = channel
        let central = channel.peer.identifier.uuidString
        output.emit(
            "channelOpened", ["central": central, "psm": Int(channel.psm), "mtu": channel.maximumWriteLength],
            human: "Central \(central) opened the L2CAP channel (SDUs up to \(channel.maximumWriteLength) bytes)")
        Task {
            let (echoed, rate, failure) = await Self.echo(channel)
            self.queue.async {
                self.channels[key] = nil
                var fields: [String: any Sendable] = [
                    "central": central, "echoed": echoed, "seconds": rate.seconds,
                    "bytesPerSecond": rate.bytesPerSecond,
                ]
                if let failure { fields["error"] = "\(failure)" }
                self.output.emit(
                    "channelClosed", fields,
                    human:
                        "Channel of \(central) closed\(failure.map { " (\($0))" } ?? ""): echoed \(echoed) bytes (\(rate))"
                )
            }
        }
    }

    /// Reads SDUs and writes each back until the central closes the channel: the bytes echoed,
    /// their rate from the first SDU to the last, and the error that ended it, if any.
    private static func echo(_ channel: L2CAPChannel) async -> (Int, Throughput, (any Error)?) {
        var echoed = 0
        var first: ContinuousClock.Instant?
        var last = ContinuousClock.now
        do {
            while let sdu = try await channel.read() {
                if first == nil { first = .now }
                try await channel.write(sdu)
                echoed += sdu.count
                last = .now
            }
        } catch {
            return (echoed, Throughput(bytes: echoed, from: first ?? last, to: last), error)
        }
        return (echoed, Throughput(bytes: echoed, from: first ?? last, to: last), nil)
    }
}
