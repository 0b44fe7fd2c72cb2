internal import DBus

/// Routing of incoming method calls: object lookup, argument signatures, injected faults, then the handler.
extension SimulatorCore {
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    /// The in-signatures of the methods each interface serves.
    static let methodSignatures: [String: [String: String]] = [
        adapterInterface: [
            "StartDiscovery": "", "StopDiscovery": "", "SetDiscoveryFilter": "a{sv}", "GetDiscoveryFilters": "",
            "RemoveDevice": "o", "ConnectDevice": "a{sv}",
        ],
        deviceInterface: [
            "Connect": "", "Disconnect": "", "Pair": "", "CancelPairing": "", "ConnectProfile": "s",
            "DisconnectProfile": "s",
        ],
        "org.bluez.GattCharacteristic1": [
            "ReadValue": "a{sv}", "WriteValue": "aya{sv}", "StartNotify": "", "StopNotify": "",
            "AcquireWrite": "a{sv}", "AcquireNotify": "a{sv}",
        ],
        "org.bluez.GattDescriptor1": ["ReadValue": "a{sv}", "WriteValue": "aya{sv}"],
        gattManagerInterface: ["RegisterApplication": "oa{sv}", "UnregisterApplication": "o"],
        advertisingManagerInterface: ["RegisterAdvertisement": "oa{sv}", "UnregisterAdvertisement": "o"],
        monitorManagerInterface: ["RegisterMonitor": "o", "UnregisterMonitor": "o"],
        "org.bluez.AgentManager1": ["RegisterAgent": "os", "UnregisterAgent": "o", "RequestDefaultAgent": "o"],
        "org.bluez.ProfileManager1": ["RegisterProfile": "osa{sv}", "UnregisterProfile": "o"],
        propertiesInterface: ["Get": "ss", "GetAll": "s", "Set": "ssv"],
    ]

    /// Handles one call on the queue.
    func handleCall(_ invocation: DBusMethodInvocation) {
        let message = invocation.message
        guard let path = message.path, let member = message.member?.rawValue else {
            return reply(invocation, error: DBusError(.unknownMethod, "a method call needs a path and a member"))
        }
        let signature = message.signature.rawValue
        let objectInterfaces = interfaces(at: path)
        var served = objectInterfaces.isEmpty ? [] : objectInterfaces + [Self.propertiesInterface]
        if path == .root { served = [Self.objectManagerInterface.rawValue] }
        guard !served.isEmpty else { return reply(invocation, error: BlueZErrors.unknownObject(path.rawValue)) }
        let interface =
            message.interface?.rawValue ?? served.first { Self.signature(of: member, in: $0) != nil } ?? ""
        let expected = Self.signature(of: member, in: interface)
        guard served.contains(interface), expected == signature else {
            return reply(
                invocation,
                error: BlueZErrors.unknownMethod(member: member, signature: signature, interface: interface))
        }
        let method = SimulatedMethod(interface: interface, member: member)
        switch takeFault(for: method, at: path) {
        case nil:
            route(invocation, method, path, extraDelay: .zero)
        case .error(let name, let text)?:
            reply(invocation, error: DBusError(name: name, message: text))
        case .noReply?:
            hold(invocation)
        case .delay(let delay)?:
            if method == .connect || method == .pair || method == .startDiscovery {
                route(invocation, method, path, extraDelay: delay)
            } else {
                after(delay) { self.route(invocation, method, path, extraDelay: .zero) }
            }
        }
    }

    static func signature(of member: String, in interface: String) -> String? {
        if interface == objectManagerInterface.rawValue { return member == "GetManagedObjects" ? "" : nil }
        return methodSignatures[interface]?[member]
    }

    private func route(
        _ invocation: DBusMethodInvocation, _ method: SimulatedMethod, _ path: ObjectPath, extraDelay: Duration
    ) {
        let arguments = (try? invocation.arguments()) ?? []
        switch (method.interface, method.member) {
        case (Self.objectManagerInterface.rawValue, _):
            reply(invocation, [managedObjects()])
        case (Self.propertiesInterface, "Get"):
            getProperty(invocation, path, arguments)
        case (Self.propertiesInterface, "GetAll"):
            let name = arguments.first?.stringValue ?? ""
            guard let values = properties(of: path, interface: name) else {
                return reply(invocation, error: BlueZErrors.noSuchInterface(name))
            }
            reply(invocation, [.stringVariantDictionary(values)])
        case (Self.propertiesInterface, "Set"):
            setProperty(invocation, path, arguments)
        case (Self.adapterInterface, _):
            handleAdapterCall(invocation, method.member, path, arguments, extraDelay: extraDelay)
        case (Self.deviceInterface, _):
            handleDeviceCall(invocation, method.member, path, extraDelay: extraDelay)
        case ("org.bluez.GattCharacteristic1", _), ("org.bluez.GattDescriptor1", _):
            handleGATTCall(invocation, method.member, path, arguments)
        case (Self.advertisingManagerInterface, _):
            handleAdvertisingManagerCall(invocation, method.member, path, arguments)
        case (Self.monitorManagerInterface, _):
            handleMonitorManagerCall(invocation, method.member, path, arguments)
        case (Self.gattManagerInterface, _):
            handleGattManagerCall(invocation, method.member, path, arguments)
        case ("org.bluez.AgentManager1", _):
            handleAgentManagerCall(invocation, method.member, arguments)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }

    private func getProperty(_ invocation: DBusMethodInvocation, _ path: ObjectPath, _ arguments: [DBusValue]) {
        let interface = arguments.first?.stringValue ?? ""
        let name = arguments.count > 1 ? arguments[1].stringValue ?? "" : ""
        guard let values = properties(of: path, interface: interface) else {
            return reply(invocation, error: BlueZErrors.noSuchInterface(interface))
        }
        guard let value = values[name] else {
            return reply(invocation, error: DBusError(.invalidArgs, "No such property '\(name)'"))
        }
        reply(invocation, [.variant(value)])
    }

    /// The writable properties and their signatures.
    static let writableProperties: [String: [String: String]] = [
        adapterInterface: [
            "Alias": "s", "Powered": "b", "Discoverable": "b", "DiscoverableTimeout": "u", "Pairable": "b",
            "PairableTimeout": "u",
        ],
        deviceInterface: ["Alias": "s", "Trusted": "b", "Blocked": "b"],
    ]

    private func setProperty(_ invocation: DBusMethodInvocation, _ path: ObjectPath, _ arguments: [DBusValue]) {
        let interface = arguments.first?.stringValue ?? ""
        let name = arguments.count > 1 ? arguments[1].stringValue ?? "" : ""
        guard arguments.count == 3, case .variant(let value) = arguments[2] else {
            return reply(invocation, error: DBusError(.invalidArgs, "Invalid argument type"))
        }
        guard let current = properties(of: path, interface: interface) else {
            return reply(invocation, error: BlueZErrors.noSuchInterface(interface))
        }
        guard let signature = Self.writableProperties[interface]?[name] else {
            if current[name] != nil {
                return reply(invocation, error: DBusError(.propertyReadOnly, "Property '\(name)' is not writable"))
            }
            return reply(invocation, error: DBusError(.unknownProperty, "No such property '\(name)'"))
        }
        guard value.signature.rawValue == signature else {
            return reply(invocation, error: DBusError(.invalidSignature, "Invalid signature for '\(name)'"))
        }
        if interface == Self.adapterInterface {
            setAdapterProperty(invocation, path, name, value)
        } else {
            setDeviceProperty(invocation, path, name, value)
        }
    }

    private func handleAgentManagerCall(_ invocation: DBusMethodInvocation, _ member: String, _ arguments: [DBusValue])
    {
        let sender = invocation.sender?.rawValue ?? ""
        switch member {
        case "RegisterAgent":
            guard let path = arguments.first?.objectPathValue else {
                return reply(invocation, error: BlueZErrors.invalidArguments())
            }
            let capabilities = [
                "", "DisplayOnly", "DisplayYesNo", "KeyboardOnly", "NoInputNoOutput", "KeyboardDisplay",
            ]
            guard capabilities.contains(arguments[1].stringValue ?? "?") else {
                return reply(invocation, error: BlueZErrors.invalidArguments())
            }
            guard agents[sender] == nil else { return reply(invocation, error: BlueZErrors.alreadyExists) }
            agents[sender] = path
            agentCapabilities[sender] = arguments[1].stringValue
            agentJoinsDefaultQueue(sender)
            reply(invocation)
        case "UnregisterAgent", "RequestDefaultAgent":
            guard let path = arguments.first?.objectPathValue, agents[sender] == path else {
                return reply(invocation, error: BlueZErrors.doesNotExist)
            }
            if member == "UnregisterAgent" {
                agentLeavesDefaultQueue(sender)
                agents[sender] = nil
            } else {
                makeDefaultAgent(sender)
            }
            reply(invocation)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }
}
