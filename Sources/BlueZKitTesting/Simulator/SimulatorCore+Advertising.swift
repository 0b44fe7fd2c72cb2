internal import DBus

/// `org.bluez.LEAdvertisingManager1` on each adapter (`src/advertising.c`).
extension SimulatorCore {
    static let advertisingManagerInterface = "org.bluez.LEAdvertisingManager1"
    static let advertisementInterface: InterfaceName = "org.bluez.LEAdvertisement1"
    /// Advertising instances of the simulated controller (`max_ads`).
    static let maximumAdvertisements = 5

    /// One registered advertisement (`struct btd_adv_client`).
    struct AdvertisementRegistration: Sendable {
        let id: Int
        let adapter: String
        let owner: String
        let path: ObjectPath
        /// Nil while bluetoothd waits for the advertisement's properties.
        var advertisement: SimulatedAdvertisement?
    }

    func advertisingManagerProperties(_ adapter: String) -> [String: DBusValue] {
        let active = advertisements.filter { $0.adapter == adapter }.count
        var values: [String: DBusValue] = [
            "ActiveInstances": .byte(UInt8(active)),
            "SupportedInstances": .byte(UInt8(max(0, Self.maximumAdvertisements - active))),
            "SupportedIncludes": .stringArray(AdvertisementParser.supportedIncludes),
        ]
        let extended = adapters[adapter]?.configuration.extendedAdvertising ?? false
        // `secondary_exists`: only for a controller with extended advertising.
        if extended { values["SupportedSecondaryChannels"] = .stringArray(Self.secondaryChannels) }
        // Experimental before 5.77 (7e028287a).
        guard honoursAdvertisingParameters else { return values }
        values["SupportedFeatures"] = .stringArray(extended ? ["CanSetTxPower", "HardwareOffload"] : [])
        var capabilities: [DBusValue.DictionaryEntry] = []
        if extended {
            capabilities.append(.init(.string("MinTxPower"), .variant(.int16(Self.txPowerRange.lowerBound))))
            capabilities.append(.init(.string("MaxTxPower"), .variant(.int16(Self.txPowerRange.upperBound))))
        }
        // The kernel's number (MGMT Read Advertising Features), whatever bluetoothd then takes.
        let length = UInt8(extended ? 251 : 31)
        capabilities.append(.init(.string("MaxAdvLen"), .variant(.byte(length))))
        capabilities.append(.init(.string("MaxScnRspLen"), .variant(.byte(length))))
        values["SupportedCapabilities"] = .dictionary(key: "s", value: "v", capabilities)
        return values
    }

    /// The secondary channels of a controller with extended advertising (LE 1M, 2M and Coded).
    static let secondaryChannels = ["1M", "2M", "Coded"]
    /// The TX power range a simulated controller with extended advertising reports, in dBm.
    static let txPowerRange: ClosedRange<Int16> = -20...10

    /// Whether bluetoothd shows `SupportedCapabilities` and parses intervals and TX power: 5.77
    /// and later, or an older one with `--experimental`.
    var honoursAdvertisingParameters: Bool {
        options.version >= .bluez5_82 || options.experimental || options.advertisementMonitor
    }

    /// The advertising data bluetoothd takes: 31 bytes, or the kernel's 251 (`MaxAdvLen`) for a
    /// controller with extended advertising where bluetoothd sends longer data as extended
    /// advertising (5.76 and later: 5.82 and 5.87 here). bluetoothd 5.66 reports the kernel's 251 in
    /// `SupportedCapabilities` all the same (seen with Bumble's controller in the guest).
    func maximumAdvertisingLength(_ adapter: String) -> Int {
        let extended = adapters[adapter]?.configuration.extendedAdvertising ?? false
        return extended && options.version >= .bluez5_82 ? 251 : 31
    }

    func handleAdvertisingManagerCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, _ arguments: [DBusValue]
    ) {
        guard let adapter = adapter(at: path) else {
            return reply(invocation, error: BlueZErrors.unknownObject(path.rawValue))
        }
        let sender = invocation.sender?.rawValue ?? ""
        guard let object = arguments.first?.objectPathValue else {
            return reply(invocation, error: BlueZErrors.invalidArguments())
        }
        let index = advertisements.firstIndex { $0.adapter == adapter.name && $0.owner == sender && $0.path == object }
        switch member {
        case "RegisterAdvertisement":
            guard index == nil else { return reply(invocation, error: BlueZErrors.alreadyExists) }
            guard let connection, let owner = try? BusName(sender) else {
                return reply(invocation, error: BlueZErrors.failed("Failed to register advertisement"))
            }
            guard advertisements.filter({ $0.adapter == adapter.name }).count < Self.maximumAdvertisements else {
                return reply(invocation, error: BlueZErrors.notPermitted("Maximum advertisements reached"))
            }
            let registration = AdvertisementRegistration(
                id: makeAttemptID(), adapter: adapter.name, owner: sender, path: object)
            advertisements.append(registration)
            readAdvertisement(registration, from: owner, on: connection, replyTo: invocation)
        case "UnregisterAdvertisement":
            guard let index else { return reply(invocation, error: BlueZErrors.doesNotExist) }
            advertisements.remove(at: index)
            propertiesChanged(
                adapter.path, Self.advertisingManagerInterface, ["SupportedInstances", "ActiveInstances"])
            reply(invocation)
            refreshAdvertisingMirrors(adapter.name)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }

    /// `GetAll` on the advertisement, then parses it and answers. When `GetAll` fails, bluetoothd's
    /// proxy never appears and the registration waits until the application leaves the bus.
    private func readAdvertisement(
        _ registration: AdvertisementRegistration, from owner: BusName, on connection: DBusConnection,
        replyTo invocation: DBusMethodInvocation
    ) {
        let epoch = self.epoch
        Task {
            let reply = try? await connection.call(
                destination: owner, path: registration.path, interface: .properties, member: "GetAll",
                arguments: [.string(Self.advertisementInterface.rawValue)])
            self.perform(ifEpoch: epoch) {
                self.finishAdvertisement(registration, reply?.first?.stringKeyedDictionary, invocation)
            }
        }
    }

    private func finishAdvertisement(
        _ registration: AdvertisementRegistration, _ properties: [String: DBusValue]?,
        _ invocation: DBusMethodInvocation
    ) {
        let index = advertisements.firstIndex {
            $0.adapter == registration.adapter && $0.owner == registration.owner && $0.path == registration.path
                && $0.advertisement == nil
        }
        guard let index, let adapter = adapters[registration.adapter] else {
            return reply(invocation, error: BlueZErrors.failed("Failed to complete registration"))
        }
        guard let properties else { return hold(invocation) }
        guard
            let advertisement = AdvertisementParser.parse(
                properties, owner: registration.owner, path: registration.path,
                honoursParameters: honoursAdvertisingParameters,
                secondaryChannels: adapter.configuration.extendedAdvertising ? Self.secondaryChannels : []),
            advertisement.dataLength
                <= advertisement.maximumDataLength(
                    adapterDiscoverable: adapter.discoverable,
                    advertisingLength: maximumAdvertisingLength(registration.adapter))
        else {
            advertisements.remove(at: index)
            return reply(invocation, error: BlueZErrors.failed("Failed to parse advertisement."))
        }
        advertisements[index].advertisement = advertisement
        propertiesChanged(adapter.path, Self.advertisingManagerInterface, ["SupportedInstances", "ActiveInstances"])
        reply(invocation)
        refreshAdvertisingMirrors(adapter.name)
        if let timeout = advertisement.timeout {
            after(.seconds(Int(timeout))) { self.advertisementTimedOut(registration.id) }
        }
    }

    /// `client_timeout`: `Release`, then the advertisement is removed.
    private func advertisementTimedOut(_ id: Int) {
        guard let index = advertisements.firstIndex(where: { $0.id == id }), let connection else { return }
        let registration = advertisements.remove(at: index)
        sendRelease(registration, on: connection)
        propertiesChanged(
            Self.adapterPath(registration.adapter), Self.advertisingManagerInterface,
            ["SupportedInstances", "ActiveInstances"])
        refreshAdvertisingMirrors(registration.adapter)
    }

    /// `client_release`: calls `Release` on the advertisement without waiting for the reply.
    func sendRelease(_ registration: AdvertisementRegistration, on connection: DBusConnection) {
        guard let owner = try? BusName(registration.owner),
            let message = try? DBusMessage.methodCall(
                destination: owner, path: registration.path, interface: Self.advertisementInterface, member: "Release")
        else { return }
        connection.send(message)
    }

    /// Drops the advertisements of a client that left the bus (`client_disconnect_cb`).
    func advertisementOwnerLeft(_ owner: String) {
        let gone = advertisements.filter { $0.owner == owner }
        advertisements.removeAll { $0.owner == owner }
        for adapter in Set(gone.map(\.adapter)).sorted() {
            propertiesChanged(
                Self.adapterPath(adapter), Self.advertisingManagerInterface, ["SupportedInstances", "ActiveInstances"])
            refreshAdvertisingMirrors(adapter)
        }
    }

    /// Drops the advertisements of a removed adapter, calling `Release` on each (`client_destroy`).
    func releaseAdvertisements(adapter: String) {
        let gone = advertisements.filter { $0.adapter == adapter && $0.advertisement != nil }
        advertisements.removeAll { $0.adapter == adapter }
        dropAdvertisingMirrors(adapter)
        guard let connection else { return }
        for registration in gone { sendRelease(registration, on: connection) }
    }

    /// The registered advertisements of `adapter`, in registration order.
    func registeredAdvertisements(adapter: String) -> [SimulatedAdvertisement] {
        run { advertisements.filter { $0.adapter == adapter }.compactMap(\.advertisement) }
    }
}
