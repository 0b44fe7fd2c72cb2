import BlueZ
import Foundation

/// Turning a `MutableService` into a GATT application, and advertising: the engine's work, on the
/// bus queue; bluetoothd's reads and writes go to the manager as events.
extension PeripheralEngine {
    /// Exports `layouts` as one GATT application and registers it (`RegisterApplication`).
    ///
    /// Several layouts go into one application when they are published together (after
    /// bluetoothd or the adapter came back, or on restoration): bluetoothd then changes its
    /// database once, and a connected central gets one Service Changed instead of one per
    /// service. Each change makes bluetoothd's GATT server answer that central's next request
    /// with "Database Out of Sync", which bluetoothd 5.87 as the central can crash on.
    func register(_ layouts: [PeripheralManager.ApplicationLayout]) async throws(BlueZError) {
        let (client, number, adapterAddress) = sync { state in
            state.nextApplication += 1
            return (state.client, state.nextApplication, state.adapterAddress)
        }
        guard let client, let adapter = await adapterPath(client) else {
            throw BlueZError(.notReady, "no adapter")
        }
        let features = serverFeatures(client)
        let characteristics = layouts.flatMap { $0.services.flatMap { $0.publishedCharacteristics } }
        for characteristic in characteristics {
            if let warning = lostWriteResultsWarning(for: characteristic) { BlueZLog.warning(warning) }
        }
        var descriptions: [BlueZGattApplication.Service] = []
        for layout in layouts {
            // A layout's `includes` index its own services: shifted past the layouts before it.
            let offset = descriptions.count
            descriptions += zip(layout.services, layout.includes).map { service, includes in
                BlueZGattApplication.Service(
                    uuid: service.uuid.bluezString, isPrimary: service.isPrimary,
                    characteristics: service.publishedCharacteristics.map {
                        gattCharacteristic($0, adapterAddress: adapterAddress, features: features)
                    },
                    includes: includes.map { $0 + offset })
            }
        }
        let application = try await BlueZGattApplication(
            client: client, services: descriptions, number: number)
        do throws(BlueZError) {
            try await application.register(on: adapter)
        } catch {
            await application.unregister(from: nil)
            throw error
        }
        sync { state in
            for layout in layouts {
                state.applications[ObjectIdentifier(layout.host)] = application
                state.inclusion.layouts[ObjectIdentifier(layout.host)] = layout
            }
            for (characteristic, id) in zip(characteristics, application.characteristicIDs) {
                state.characteristics[ObjectIdentifier(characteristic)] = (application, id)
                if PeripheralEngine.offersNotifySockets(characteristic, features) {
                    state.socketCharacteristics.insert(ObjectIdentifier(characteristic))
                } else {
                    state.socketCharacteristics.remove(ObjectIdentifier(characteristic))
                }
            }
        }
    }

    /// The warning for a characteristic whose write results never reach the central, the first
    /// time this manager publishes one; nil otherwise.
    ///
    /// bluetoothd (5.66 through 5.87) acknowledges every write to a characteristic that has
    /// both `.write` and `.writeWithoutResponse` (Nordic UART's RX, for one) without waiting for
    /// the app: the error an app passes to `respond(to:withResult:)` is then lost.
    func lostWriteResultsWarning(for characteristic: MutableCharacteristic) -> String? {
        guard characteristic.properties.isSuperset(of: [.write, .writeWithoutResponse]),
            !characteristic.permissions.isDisjoint(with: [.writeable, .writeEncryptionRequired])
        else { return nil }
        let first = sync { state in
            defer { state.warnedOfLostWriteResults = true }
            return !state.warnedOfLostWriteResults
        }
        guard first else { return nil }
        return "characteristic \(characteristic.uuid) has both write and writeWithoutResponse: bluetoothd "
            + "acknowledges every write to it before the app answers, so an error passed to "
            + "respond(to:withResult:) does not reach the central (use two characteristics to refuse writes)"
    }

    private func gattCharacteristic(
        _ characteristic: MutableCharacteristic, adapterAddress: String, features: BlueZServerFeatures
    ) -> BlueZGattApplication.Characteristic {
        let staticValue = characteristic.value
        return BlueZGattApplication.Characteristic(
            uuid: characteristic.uuid.bluezString,
            flags: BlueZGattFlags(properties: characteristic.properties, permissions: characteristic.permissions),
            descriptors: characteristic.publishedDescriptors.map {
                BlueZGattApplication.Descriptor(uuid: $0.uuid.bluezString, flags: .read, value: Array($0.bytes))
            },
            onRead: { [weak self] request in
                // Permissions are the system's to enforce, as on Apple's platforms: the app is not
                // asked, and a static value is no exception (bluetoothd enforces the encryption
                // that `readEncryptionRequired` adds as `encrypt-read` before it calls us).
                guard !characteristic.permissions.isDisjoint(with: [.readable, .readEncryptionRequired]) else {
                    return Self.refuse(request, .readNotPermitted)
                }
                if let staticValue {
                    // Static values are answered without asking the app, as Core Bluetooth does;
                    // the request still tells who is active and the MTU of its link.
                    if let self, let address = request.deviceAddress {
                        self.centralWasActive(address: address, mtu: request.mtu.map(Int.init))
                    }
                    guard Int(request.offset) <= staticValue.count else {
                        return request.fail(with: .invalidOffset)
                    }
                    return request.respond(Array(staticValue.dropFirst(Int(request.offset))))
                }
                guard let self, let manager = self.manager else { return request.fail(with: .unlikelyError) }
                let attRequest = self.request(
                    request, characteristic, adapterAddress: adapterAddress, value: nil, answered: false,
                    queue: manager.queue)
                manager.post(.request(.read(attRequest), answeredAlready: false))
            },
            onWrite: { [weak self] request, value in
                guard let self, let manager = self.manager else { return request.fail(with: .unlikelyError) }
                guard !characteristic.permissions.isDisjoint(with: [.writeable, .writeEncryptionRequired]) else {
                    return Self.refuse(request, .writeNotPermitted)
                }
                // A Prepare Write to be queued: allowed here; the app gets the value once the
                // central executes the queue (bluetoothd then writes each part with its offset).
                if request.prepareAuthorize { return request.respond() }
                // bluetoothd 5.66 sends no `type` and does not wait for the answer to any write of a
                // characteristic that has write-without-response (its owner queue is NULL).
                let withoutResponse =
                    request.writeType == "command" || characteristic.properties.contains(.writeWithoutResponse)
                if withoutResponse { request.respond() }
                let attRequest = self.request(
                    request, characteristic, adapterAddress: adapterAddress, value: Data(value),
                    answered: withoutResponse, queue: manager.queue)
                guard withoutResponse else {
                    return manager.post(.request(.write([attRequest]), answeredAlready: false))
                }
                // Acknowledged already, so the central does not wait for the app: bounded.
                guard manager.writesWithoutResponse.admit(bytes: value.count) else { return }
                manager.post(.writeWithoutResponse(attRequest, bytes: value.count))
            },
            onNotify: { [weak self] isOn in self?.notifyingChanged(characteristic, isOn: isOn) },
            notifySockets: PeripheralEngine.offersNotifySockets(characteristic, features)
                ? notifySockets(for: characteristic) : nil
        )
    }

    /// Answers `request` with `code` (BlueZ's error for it) without asking the app.
    private static func refuse(_ request: BlueZGattRequest, _ code: ATTError.Code) {
        request.fail(with: code)
    }

    /// The app's request for `request`; `answered` when bluetoothd was answered already (a
    /// write without response), so that the request holds neither bluetoothd's message nor a timer.
    private func request(
        _ request: BlueZGattRequest, _ characteristic: MutableCharacteristic, adapterAddress: String, value: Data?,
        answered: Bool, queue: DispatchQueue
    ) -> ATTRequest {
        let address = request.deviceAddress ?? CentralSubscriptions.unknownAddress
        centralWasActive(address: address, mtu: request.mtu.map(Int.init))
        let central = central(address: address, adapter: adapterAddress)
        // An app that never answers must not leave the central waiting for bluetoothd's timeout:
        // the request's own timer, cancelled by its answer.
        let timeout = sync { $0.requestTimeout }
        return ATTRequest(
            central: central, characteristic: characteristic, offset: Int(request.offset), value: value,
            bluez: answered ? nil : request, timeout: timeout, queue: queue)
    }

    /// Publishes every added service and the advertisement again, after bluetoothd restarted or
    /// the adapter came back (their registrations died with it). Failures are logged and the
    /// services' registrations made again a few times; the delegate is not called, as Core
    /// Bluetooth restores published state silently.
    func republish() async {
        let (content, stale, staleAdvertisement) = sync { state in
            defer {
                state.applications.removeAll()
                state.inclusion.layouts.removeAll()
                state.characteristics.removeAll()
                state.advertisement = nil
            }
            // One application can hold several services: each unregistered once.
            var applications: [BlueZGattApplication] = []
            for application in state.applications.values where !applications.contains(where: { $0 === application }) {
                applications.append(application)
            }
            return (state.wantedAdvertisement, applications, state.advertisement)
        }
        for application in stale { await application.unregister(from: nil) }
        await staleAdvertisement?.unregister(from: nil)
        // A registration that fails now is made again later: the app was told its services were added.
        resetPublishRetries()
        _ = await reconcileApplications()
        if let content {
            let error = await advertise(content)
            sync { $0.isAdvertising = error == nil }
            if let error, (error as? BluetoothError)?.code != .operationCancelled {
                BlueZLog.warning("could not advertise again after bluetoothd came back: \(error)")
            }
            advertisingReported()
        }
    }

    /// What BlueZ's `LEAdvertisement1` carries for `data` (manufacturer data split into the
    /// company identifier and the payload) and `options`.
    static func advertisementContent(
        _ data: AdvertisementData, options: AdvertisingOptions = .init()
    ) -> BlueZAdvertisement.Content {
        var manufacturer: [UInt16: [UInt8]] = [:]
        if let bytes = data.manufacturerData, bytes.count >= 2 {
            manufacturer[UInt16(bytes[bytes.startIndex]) | UInt16(bytes[bytes.startIndex + 1]) << 8] = Array(
                bytes.dropFirst(2))
        }
        return BlueZAdvertisement.Content(
            localName: data.localName, serviceUUIDs: data.serviceUUIDs.map(\.bluezString),
            solicitUUIDs: data.solicitedServiceUUIDs.map(\.bluezString), manufacturerData: manufacturer,
            serviceData: Dictionary(
                uniqueKeysWithValues: data.serviceData.map { ($0.key.bluezString, Array($0.value)) }),
            includeTxPower: options.includesTxPower, interval: options.intervalMilliseconds,
            txPower: options.txPower.map { Int16(clamping: $0) }, secondaryChannel: options.secondaryPHY?.rawValue)
    }

    /// The path of the adapter `client` uses now.
    func adapterPath(_ client: BlueZClient?) async -> BlueZClient.AdapterID? {
        await client?.currentAdapter()
    }

    /// Registers the advertisement; returns the error for the delegate, if any. The caller calls
    /// ``advertisingReported()`` once it reported the result.
    func advertise(_ content: BlueZAdvertisement.Content) async -> (any Error)? {
        let (client, stops) = sync { state in
            state.advertisementsRegistering += 1
            return (state.client, state.advertisingStops)
        }
        guard let client, let adapter = await adapterPath(client) else {
            return BluetoothError(.bluetoothUnavailable, message: "no adapter")
        }
        let maximum = await client.currentServerFeatures().maximumAdvertisingDataLength
        guard content.advertisingDataLength <= maximum else {
            return BluetoothError(
                .advertisingDataTooLarge,
                message:
                    "the advertising data needs \(content.advertisingDataLength) bytes; this adapter takes \(maximum)")
        }
        if let refusal = await unsupportedAdvertisingOption(content, client: client) { return refusal }
        let previous = sync { $0.advertisement }
        await previous?.unregister(from: adapter)
        let advertisement: BlueZAdvertisement
        do throws(BlueZError) {
            advertisement = try await BlueZAdvertisement(client: client, content: content) {
                [weak self] in self?.sync { $0.isAdvertising = false }
            }
        } catch {
            return BluetoothError(.unknown, message: error.description, underlying: error)
        }
        do throws(BlueZError) {
            try await advertisement.register(on: adapter)
        } catch {
            // Not registered: the object must not stay exported.
            await advertisement.unregister(from: nil)
            return Self.advertisingRefusal(error, content)
        }
        let stopped = sync { state in
            guard state.advertisingStops == stops else { return true }
            state.advertisement = advertisement
            state.wantedAdvertisement = content
            return false
        }
        guard !stopped else {
            // `stopAdvertising()` came while bluetoothd registered it: it found nothing to stop.
            await advertisement.unregister(from: adapter)
            return BluetoothError(
                .operationCancelled, message: "stopAdvertising() was called while the advertisement was registering")
        }
        return nil
    }

    /// The caller of ``advertise(_:)`` reported its result (to the delegate or the log): when no
    /// other registration is under way, what waits for that runs.
    func advertisingReported() {
        let settled = sync { state -> [@Sendable () -> Void] in
            state.advertisementsRegistering -= 1
            guard state.advertisementsRegistering == 0 else { return [] }
            defer { state.whenAdvertisingSettles = [] }
            return state.whenAdvertisingSettles
        }
        for work in settled { work() }
    }

    /// Runs `work` once no advertisement is registering: at once when none is. On the bus queue.
    func whenAdvertisingSettles(_ work: @escaping @Sendable () -> Void) {
        let now = sync { state in
            guard state.advertisementsRegistering > 0 else { return true }
            state.whenAdvertisingSettles.append(work)
            return false
        }
        if now { work() }
    }
}
