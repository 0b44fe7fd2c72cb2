import BlueZKit
import BlueZKitTesting

/// Faults: what the simulated sensor, centrals and bluetoothd do to the managers.
extension InterleavingWorld {
    static func simulatedMethod(_ method: InterleavingStep.Method) -> SimulatedMethod {
        switch method {
        case .connect: .connect
        case .readValue: .readValue
        case .writeValue: .writeValue
        case .startNotify: .startNotify
        case .getProperty: .getProperty
        case .registerAdvertisement:
            SimulatedMethod(interface: "org.bluez.LEAdvertisingManager1", member: "RegisterAdvertisement")
        case .registerApplication: SimulatedMethod(interface: "org.bluez.GattManager1", member: "RegisterApplication")
        }
    }

    func performFault(_ step: InterleavingStep) async {
        switch step {
        case .sensorNotifies:
            nextTag &+= 1
            measurement.notify([UInt8(nextTag & 0xFF)])
            await BoundedWait.pace(.milliseconds(10))
        case .sensorInRange(let inRange):
            sensor.setInRange(inRange)
        case .sensorDropsLink:
            sensor.dropConnection()
            await BoundedWait.pace(.milliseconds(20))
        case .restartBluetoothd:
            try? await bluez.restart()
            for index in centralModels.indices {
                centralModels[index].connected = false
                centralModels[index].subscribed = false
            }
            await BoundedWait.pace(.milliseconds(50))
        case .powerCycle:
            await powerCycle()
        case .delayNext(let method, let milliseconds):
            // The calls already made reach bluetoothd first: the fault goes to a call made later.
            await settle(.milliseconds(500))
            bluez.inject(.delay(.milliseconds(milliseconds)), for: Self.simulatedMethod(method))
        case .failNext(let method):
            await settle(.milliseconds(500))
            bluez.inject(
                .error(name: "org.bluez.Error.Failed", message: "Operation failed (injected)"),
                for: Self.simulatedMethod(method))
        case .holdNext(let method):
            await settle(.milliseconds(500))
            bluez.inject(.noReply, for: Self.simulatedMethod(method))
        case .stallCentral(let index):
            guard index < centrals.count else { return }
            centrals[index].stallNotifySockets()
            centralModels[index].stalled = true
        case .resumeCentral(let index):
            guard index < centrals.count else { return }
            centrals[index].resumeNotifySockets()
            centralModels[index].stalled = false
        case .pause(let milliseconds):
            await BoundedWait.pace(.milliseconds(milliseconds))
        case .settle:
            await settle(.seconds(10))
        default:
            break
        }
    }

    /// Waits until every call started so far ended, at most `bound` (scaled); calls that wait
    /// for ever (a held reply, a peripheral out of range) only cost the bound.
    func settle(_ bound: Duration) async {
        let ledger = self.ledger
        _ = await BoundedWait.poll(bound) { ledger.openCalls.isEmpty }
    }

    /// The adapter powers off (links drop, managers see `poweredOff`), then on again.
    private func powerCycle() async {
        guard let adapter = bluez.adapters.first else { return }
        adapter.setPowered(false)
        let central = self.central
        let peripheralManager = self.peripheralManager
        _ = await BoundedWait.poll(.seconds(1)) {
            central?.state != .poweredOn && peripheralManager?.state != .poweredOn
        }
        for index in centralModels.indices {
            centralModels[index].connected = false
            centralModels[index].subscribed = false
        }
        adapter.setPowered(true)
        _ = await BoundedWait.poll(.seconds(3)) {
            (central?.state ?? .poweredOn) == .poweredOn && (peripheralManager?.state ?? .poweredOn) == .poweredOn
        }
    }
}
