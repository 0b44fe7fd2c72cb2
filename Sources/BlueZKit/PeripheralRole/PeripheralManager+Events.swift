import Foundation

/// The one way the peripheral role reaches the app: ``post(_:)``.
extension PeripheralManager {
    /// Applies `event` on `queue`, after every event posted before it. May be called from any
    /// thread; calls user code only on `queue`.
    func post(_ event: PeripheralEvent) {
        queue.async { self.apply(event) }
    }

    /// Applies `event`: the snapshot first, then the delegate, then who waits for the delegate.
    /// On `queue`.
    private func apply(_ event: PeripheralEvent) {
        switch event {
        case .state(let newState):
            Manager.learn(from: newState)
            let changed = reportedState.withLock { state in
                defer { state = newState }
                return state != newState
            }
            if changed {
                delegate?.peripheralManagerDidUpdateState(self)
                stateStreams.send(ifChanged: newState)
                // Updates waiting for room try again: the state may have ended their wait.
                updateWaiters.resumeAll()
            }
            if newState != .unknown { endRestoredSubscriptions() }
        case .willRestore(let services, let advertisement):
            var dictionary: [String: Any] = [CBPeripheralManagerRestoredStateServicesKey: services]
            if let advertisement {
                dictionary[CBPeripheralManagerRestoredStateAdvertisementDataKey] = advertisement.dictionary
            }
            delegate?.peripheralManager(self, willRestoreState: dictionary)
        case .didAdd(let service, let error, let done):
            saveState()
            delegate?.peripheralManager(self, didAdd: service as Service, error: error)
            done?(error)
        case .didStartAdvertising(let error, let saves, let done):
            if saves { saveState() }
            delegate?.peripheralManagerDidStartAdvertising(self, error: error)
            done?(error)
        case .readyToUpdate(let reason):
            switch reason {
            case .backlog: engine.sync { $0.roomTimer = nil }
            case .confirmations(let waits):
                engine.sync { state in
                    for wait in waits {
                        state.subscriptions.readyDelivered(for: wait.characteristic, generation: wait.generation)
                    }
                }
            case .sockets: break
            }
            delegate?.peripheralManagerIsReady(toUpdateSubscribers: self)
            updateWaiters.resumeAll()
        case .subscription(let change, let centrals, let characteristic):
            let delegate = self.delegate
            for central in centrals {
                switch change {
                case .subscribed:
                    delegate?.peripheralManager(
                        self, central: central, didSubscribeTo: characteristic as Characteristic)
                case .unsubscribed:
                    delegate?.peripheralManager(
                        self, central: central, didUnsubscribeFrom: characteristic as Characteristic)
                }
                subscriptionStreams.send(
                    Subscription(central: central, characteristic: characteristic, isSubscribed: change == .subscribed))
            }
        case .request(let request, let answeredAlready):
            deliver(request, answeredAlready: answeredAlready)
        case .writeWithoutResponse(let request, let bytes):
            writesWithoutResponse.delivered(bytes: bytes)
            deliver(.write([request]), answeredAlready: true)
        case .saveState:
            saveState()
        case .l2capPublished(let psm, let error, let then):
            delegate?.peripheralManager(self, didPublishL2CAPChannel: psm, error: error)
            then?(psm, error)
        case .l2capUnpublished(let psm, let error, let then):
            delegate?.peripheralManager(self, didUnpublishL2CAPChannel: psm, error: error)
            then?(error)
        case .l2capOpened(let channel, let error):
            delegate?.peripheralManager(self, didOpen: channel, error: error)
            if let channel { l2cap.deliver(channel) }
        }
    }
}
