import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the other tests on hci0 and hci1.
extension EndToEndTests {
    static let l2capService = BluetoothUUID(string: "5A1E0010-B1E2-4C00-9E00-000000000001")

    /// Our peripheral on hci1 publishes an L2CAP channel and its PSM in Apple's PSM
    /// characteristic; our central on hci0 reads the PSM, opens the channel and data goes both
    /// ways intact, through the kernel's LE credit-based channels beside the real bluetoothd.
    @Test(.loadScaledTimeLimit(minutes: 3)) func ourL2CAPChannelCarriesDataBothWays() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let link = try await L2CAPLink.open(encrypted: false)
        let (manager, server, centralManager, sensor) = (link.manager, link.server, link.centralManager, link.sensor)
        let psm = link.psm
        let centralSide = link.centralSide
        let peripheralSide = link.peripheralSide
        #expect(!sensor.isPaired, "no pairing for a channel without encryption")

        // Central → peripheral, several SDUs' worth, with Swift concurrency on both ends.
        let up = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try await centralSide.write(up)
        var received = Data()
        while received.count < up.count, let sdu = try await peripheralSide.read() { received.append(sdu) }
        #expect(received == up)
        // Peripheral → central.
        let down = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        try await peripheralSide.write(down)
        received = Data()
        while received.count < down.count, let sdu = try await centralSide.read() { received.append(sdu) }
        #expect(received == down)
        // Core Bluetooth's output stream on the peripheral, read on the central.
        peripheralSide.outputStream.open()
        #expect(peripheralSide.outputStream.write([1, 2, 3, 4], maxLength: 4) == 4)
        #expect(try await centralSide.read() == Data([1, 2, 3, 4]))

        // The central closes: the peripheral reads the end.
        centralSide.close()
        #expect(try await peripheralSide.read() == nil)

        // Unpublished: the kernel refuses new channels to the PSM.
        manager.unpublishL2CAPChannel(psm)
        try await waitUntil("unpublished") { server.events.contains("unpublished \(psm)") }
        #expect(manager.publishedL2CAPChannels.isEmpty)
        do {
            let channel = try await sensor.openL2CAPChannel(psm: psm)
            Issue.record("opened \(channel) on an unpublished PSM")
        } catch {
            #expect(error.code == .connectionFailed, "\(error)")
        }

        centralManager.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        manager.stopAdvertising()
        manager.removeAllServices()
    }

    /// The same job with the async calls only: publish, add, advertise, connect, discover, read
    /// the PSM, open; the peripheral takes the channel from its stream; unpublish and disconnect
    /// return once done.
    @Test(.loadScaledTimeLimit(minutes: 3)) func theAsyncCallsPublishOpenAndTearDownAChannel() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = L2CAPManagerRecorder()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let incoming = manager.l2capChannels()
        let psm = try await manager.publishL2CAPChannel(requiringEncryption: false)
        #expect(server.published == psm, "the delegate heard it first")
        let service = MutableService(type: Self.l2capService, primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
                value: Data([UInt8(psm & 0xFF), UInt8(psm >> 8)]), permissions: [.readable])
        ]
        try await manager.addService(service)

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [Self.l2capService])
        try await waitUntil("scanning") { centralManager.isScanning }
        try await manager.startAdvertising(with: AdvertisementData(serviceUUIDs: [Self.l2capService]))
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)
        try await centralManager.connect(to: sensor)
        let remote = try #require(try await sensor.discoverServices(matching: [Self.l2capService]).first)
        let psmType = BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString)
        let remotePSM = try #require(try await sensor.discoverCharacteristics(matching: [psmType], in: remote).first)
        let value = try await sensor.readValue(of: remotePSM)
        #expect(value == Data([UInt8(psm & 0xFF), UInt8(psm >> 8)]))

        let centralSide = try await sensor.openL2CAPChannel(psm: psm)
        var channels = incoming.makeAsyncIterator()
        let peripheralSide = try #require(await channels.next())
        #expect(peripheralSide.psm == psm)
        try await centralSide.write(Data("ping".utf8))
        #expect(try await peripheralSide.read() == Data("ping".utf8))
        try await peripheralSide.write(Data("pong".utf8))
        #expect(try await centralSide.read() == Data("pong".utf8))

        try await manager.unpublishL2CAPChannel(psm: psm)
        #expect(manager.publishedL2CAPChannels.isEmpty)
        #expect(server.events.contains("unpublished \(psm)"))
        try await centralManager.disconnect(from: sensor)
        #expect(sensor.state == .disconnected)
        // The link went down: the channel ends (the end of the stream, or an error).
        let afterTheLink = try? await peripheralSide.read()
        #expect(afterTheLink == nil)
        manager.stopAdvertising()
        manager.removeAllServices()
    }

    /// A channel published with encryption: the kernel refuses the unencrypted central, which
    /// then encrypts the link (bluetoothd pairs, Just Works through both managers' agents) and
    /// retries; the channel opens and carries data.
    @Test(.loadScaledTimeLimit(minutes: 3), .asksForDefaultAgent) func anEncryptedL2CAPChannelPairsFirst() async throws
    {
        try await ExamplePeripheral.forgetKnownDevices()
        try await PairingTools.removeDevices(on: "hci0")
        try await PairingTools.removeDevices(on: "hci1")
        do {
            let link = try await L2CAPLink.open(encrypted: true)
            // The kernel paired (SMP) before it retried the channel; bluetoothd reports it after.
            try await waitUntil("bluetoothd reports the pairing") { link.sensor.isPaired }
            try await link.centralSide.write(Data([7, 7, 7]))
            #expect(try await link.peripheralSide.read() == Data([7, 7, 7]))
            link.centralManager.cancelPeripheralConnection(link.sensor)
            try await waitUntil("disconnected", timeout: .seconds(30)) { link.sensor.state == .disconnected }
            link.manager.stopAdvertising()
            link.manager.removeAllServices()
        } catch {
            try? await PairingTools.removeDevices(on: "hci0")
            try? await PairingTools.removeDevices(on: "hci1")
            throw error
        }
        try await PairingTools.removeDevices(on: "hci0")
        try await PairingTools.removeDevices(on: "hci1")
    }
}

/// Our peripheral on hci1 with a published channel, our central on hci0 connected to it, and
/// the channel opened with the PSM read from Apple's PSM characteristic.
struct L2CAPLink {
    let manager: PeripheralManager
    let server: L2CAPManagerRecorder
    let centralManager: CentralManager
    let central: E2ECentralDelegate
    let sensor: Peripheral
    let recorder: L2CAPPeripheralRecorder
    let psm: L2CAPPSM
    let centralSide: L2CAPChannel
    let peripheralSide: L2CAPChannel

    static func open(encrypted: Bool) async throws -> L2CAPLink {
        let server = L2CAPManagerRecorder()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue,
            options: PeripheralManagerOptions(adapter: "hci1", requestsDefaultPairingAgent: encrypted))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        manager.publishL2CAPChannel(withEncryption: encrypted)
        try await waitUntil("published", timeout: .seconds(10)) { server.published != nil }
        let psm = try #require(server.published)
        #expect((0x80...0xFF).contains(psm), "a dynamic LE PSM")
        #expect(manager.publishedL2CAPChannels == [psm])

        // What Apple's apps do: the PSM in a readable characteristic of Apple's UUID. Served
        // from the read request (no cached value), so that the manager learns the central's MTU.
        let psmCharacteristic = MutableCharacteristic(
            type: BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
            value: nil, permissions: [.readable])
        let service = MutableService(type: EndToEndTests.l2capService, primary: true)
        service.characteristics = [psmCharacteristic]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.events.contains("added") }

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue,
            options: CentralManagerOptions(adapter: "hci0", requestsDefaultPairingAgent: encrypted))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [EndToEndTests.l2capService])
        try await waitUntil("scanning") { centralManager.isScanning }
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [EndToEndTests.l2capService]])
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)
        let recorder = L2CAPPeripheralRecorder()
        sensor.delegate = recorder
        centralManager.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        sensor.discoverServices([EndToEndTests.l2capService])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let remote = try #require(sensor.services?.first)
        sensor.discoverCharacteristics([BluetoothUUID(string: CBUUIDL2CAPPSMCharacteristicString)], for: remote)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let remotePSM = try #require(remote.characteristics?.first)
        sensor.readValue(for: remotePSM)
        try await waitUntil("read the PSM") { recorder.count("value") == 1 }
        let value = try #require(remotePSM.value)
        let readPSM = UInt16(value[value.startIndex]) | UInt16(value[value.startIndex + 1]) << 8
        #expect(readPSM == psm)

        // Open it with Core Bluetooth's call; the delegate gets the channel on both sides.
        sensor.openL2CAPChannel(readPSM)
        let diagnostics = { "central: \(recorder.events), peripheral: \(server.events)" }
        let opened = { recorder.channel != nil && server.channel != nil }
        try await pollUntil("opened", timeout: .seconds(60), diagnostics: diagnostics, opened)
        let centralSide = try #require(recorder.channel)
        let peripheralSide = try #require(server.channel)
        #expect(centralSide.psm == psm && peripheralSide.psm == psm)
        #expect(centralSide.peer === sensor)
        // The channel's central is the one that read the PSM, with the MTU its request told.
        let reader = try #require(server.reader)
        let peer = try #require(peripheralSide.peer as? Central)
        #expect(peer == reader)
        #expect(peer.maximumUpdateValueLength == reader.maximumUpdateValueLength)
        return L2CAPLink(
            manager: manager, server: server, centralManager: centralManager, central: central, sensor: sensor,
            recorder: recorder, psm: psm, centralSide: centralSide, peripheralSide: peripheralSide)
    }
}

final class L2CAPManagerRecorder: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.l2cap.peripheral")
    private let state = Mutex<([String], L2CAPPSM?, L2CAPChannel?, Central?)>(([], nil, nil, nil))
    var events: [String] { state.withLock { $0.0 } }
    var published: L2CAPPSM? { state.withLock { $0.1 } }
    var channel: L2CAPChannel? { state.withLock { $0.2 } }
    /// The central that read the PSM characteristic.
    var reader: Central? { state.withLock { $0.3 } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        let psm = state.withLock { state in
            state.3 = request.central
            return state.1
        }
        guard let psm, request.offset <= 2 else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = Data([UInt8(psm & 0xFF), UInt8(psm >> 8)]).dropFirst(request.offset)
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        state.withLock { $0.0.append(error == nil ? "added" : "add failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?) {
        state.withLock {
            $0.0.append(error == nil ? "published \(PSM)" : "publish failed: \(error!)")
            if error == nil { $0.1 = PSM }
        }
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, didUnpublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?
    ) {
        state.withLock { $0.0.append(error == nil ? "unpublished \(PSM)" : "unpublish failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        state.withLock {
            $0.0.append(error == nil ? "opened" : "open failed: \(error!)")
            if let channel { $0.2 = channel }
        }
    }
}

final class L2CAPPeripheralRecorder: PeripheralDelegate, @unchecked Sendable {
    private let state = Mutex<([String], L2CAPChannel?)>(([], nil))
    func count(_ prefix: String) -> Int { state.withLock { $0.0.filter { $0.hasPrefix(prefix) }.count } }
    var events: [String] { state.withLock { $0.0 } }
    var channel: L2CAPChannel? { state.withLock { $0.1 } }
    private func record(_ event: String, _ error: (any Error)?) {
        state.withLock { $0.0.append(error.map { "\(event) failed: \($0)" } ?? event) }
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) { record("services", error) }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record("characteristics", error)
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        record("value", error)
    }
    func peripheral(_ peripheral: Peripheral, didOpen channel: L2CAPChannel?, error: (any Error)?) {
        record("opened", error)
        if let channel { state.withLock { $0.1 = channel } }
    }
}
