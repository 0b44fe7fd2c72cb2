import DBus

/// The exported `org.bluez.Agent1` object: the built-in answers (just works only), or the responder's.
extension BlueZAgent {
    func makeInterface() -> DBusInterface {
        let path = path
        @Sendable func builtIn(_ what: String, accept: Bool) -> @Sendable (DBusMethodInvocation) -> Void {
            { invocation in
                let device = Self.device(invocation)?.rawValue ?? ""
                if accept {
                    DBusLog.debug("agent \(path): \(what) \(device): accepted (just works)")
                    invocation.reply()
                } else {
                    DBusLog.debug("agent \(path): \(what) \(device): rejected (\(Self.capability))")
                    invocation.reply(error: DBusError(name: Self.rejected, message: "\(what) needs someone to decide"))
                }
            }
        }
        return DBusInterface(
            BlueZNames.agent,
            methods: [
                // Weakly: the connection keeps the handlers, and the agent the connection.
                DBusMethod("Release") { [weak self] invocation in
                    let open = self?.state.withLock { state in
                        state.registered = false
                        defer { state.open = [:] }
                        return state.open
                    }
                    self?.cancel((open ?? [:]).values)
                    DBusLog.debug("agent \(path): released by bluetoothd")
                    invocation.reply()
                },
                DBusMethod("RequestPinCode", in: "o", out: "s", handler: builtIn("RequestPinCode", accept: false)),
                DBusMethod("DisplayPinCode", in: "os", handler: builtIn("DisplayPinCode", accept: false)),
                DBusMethod("RequestPasskey", in: "o", out: "u") { [weak self] invocation in
                    self?.route(invocation, .requestPasskey, else: builtIn("RequestPasskey", accept: false))
                },
                // bluetoothd sends DisplayPasskey without waiting for a reply.
                DBusMethod("DisplayPasskey", in: "ouq") { [weak self] invocation in
                    let arguments = (try? invocation.arguments()) ?? []
                    let passkey = arguments.count > 1 ? arguments[1].uint32Value ?? 0 : 0
                    let entered = arguments.count > 2 ? arguments[2].uint16Value ?? 0 : 0
                    self?.route(
                        invocation, .displayPasskey(passkey, entered: entered),
                        else: builtIn("DisplayPasskey", accept: true))
                },
                DBusMethod("RequestConfirmation", in: "ou") { [weak self] invocation in
                    let arguments = (try? invocation.arguments()) ?? []
                    let passkey = arguments.count > 1 ? arguments[1].uint32Value ?? 0 : 0
                    self?.route(
                        invocation, .confirmPasskey(passkey), else: builtIn("RequestConfirmation", accept: false))
                },
                DBusMethod("RequestAuthorization", in: "o") { [weak self] invocation in
                    self?.route(invocation, .authorizePairing, else: builtIn("RequestAuthorization", accept: true))
                },
                DBusMethod("AuthorizeService", in: "os") { [weak self] invocation in
                    let arguments = (try? invocation.arguments()) ?? []
                    let uuid = arguments.count > 1 ? arguments[1].stringValue ?? "" : ""
                    self?.route(invocation, .authorizeService(uuid), else: builtIn("AuthorizeService", accept: false))
                },
                DBusMethod("Cancel") { [weak self] invocation in
                    DBusLog.debug("agent \(path): request cancelled by bluetoothd")
                    self?.cancelOpenRequests()
                    invocation.reply()
                },
            ])
    }

    /// Hands a request to the responder and answers when it does (or once, when the responder
    /// answers twice); without a responder answers with `builtIn`.
    private func route(
        _ invocation: DBusMethodInvocation, _ request: Request,
        else builtIn: @Sendable (DBusMethodInvocation) -> Void
    ) {
        guard let device = Self.device(invocation) else {
            return invocation.reply(error: DBusError(.invalidArgs, "no device"))
        }
        let displayOnly: Bool
        if case .displayPasskey = request { displayOnly = true } else { displayOnly = false }
        let (responder, id): (Responder?, Int) = state.withLock { state in
            guard let responder = state.responder else { return (nil, 0) }
            state.nextRequest += 1
            if !displayOnly { state.open[state.nextRequest] = invocation }
            return (responder, state.nextRequest)
        }
        guard let responder else { return builtIn(invocation) }
        if displayOnly { invocation.reply() }
        let path = path
        responder(BlueZClient.DeviceID(path: device), request) { [weak self] answer in
            guard !displayOnly, let invocation = self?.state.withLock({ $0.open.removeValue(forKey: id) }) else {
                return
            }
            DBusLog.debug("agent \(path): \(request) \(device.rawValue): \(answer)")
            switch (request, answer) {
            case (.requestPasskey, .passkey(let passkey)): invocation.reply([.uint32(passkey)])
            case (.requestPasskey, _), (_, .reject), (_, .passkey):
                invocation.reply(error: DBusError(name: Self.rejected, message: "rejected by the app"))
            case (_, .accept): invocation.reply()
            }
        }
    }

    /// bluetoothd's `Cancel`: the open requests end `Canceled`, and the responder hears of it.
    private func cancelOpenRequests() {
        let (open, responder) = state.withLock { state in
            defer { state.open = [:] }
            return (state.open, state.responder)
        }
        cancel(open.values)
        if !open.isEmpty { responder?(nil, nil) { _ in } }
    }

    static func device(_ invocation: DBusMethodInvocation) -> ObjectPath? {
        try? invocation.arguments().first?.objectPathValue
    }
}
