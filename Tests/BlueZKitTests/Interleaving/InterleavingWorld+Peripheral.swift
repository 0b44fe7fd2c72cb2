import BlueZKit
import BlueZKitTesting
import Foundation
import Locking

/// The peripheral role's steps: a `PeripheralManager` and the simulated centrals that use it.
extension InterleavingWorld {
    /// The current peripheral manager (and the simulated centrals), created when there is none;
    /// nil when it does not power on.
    func ensurePeripheralManager() async -> (PeripheralManager, PeripheralManagerRecorder)? {
        if centrals.isEmpty {
            for index in 0..<2 {
                guard let central = try? bluez.addCentral(address: "11:22:33:44:55:0\(index + 1)") else { return nil }
                centrals.append(central)
                centralModels.append(CentralModel())
            }
        }
        if peripheralManager == nil {
            peripheralGeneration += 1
            let adapter = bluez.adapters.first
            foreignOwners = Set(
                (adapter?.registeredAdvertisements.map(\.owner) ?? [])
                    + (adapter?.registeredApplications.map(\.owner) ?? []))
            let recorder = PeripheralManagerRecorder(generation: peripheralGeneration)
            peripheralManager = PeripheralManager(
                delegate: recorder, queue: recorder.queue,
                options: PeripheralManagerOptions(busAddress: bluez.busAddress))
            peripheralRecorder = recorder
            let characteristic = MutableCharacteristic(
                type: BluetoothUUID(0xAB01), properties: [.notify, .read, .write], value: nil,
                permissions: [.readable, .writeable])
            let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
            service.characteristics = [characteristic]
            self.service = service
            notifyCharacteristic = characteristic
            serviceWanted = false
            advertisingWanted = nil
        }
        guard let peripheralManager, let peripheralRecorder,
            await BoundedWait.poll(.seconds(15), { peripheralManager.state == .poweredOn })
        else { return nil }
        return (peripheralManager, peripheralRecorder)
    }

    func performPeripheral(_ step: InterleavingStep) async {
        if case .releasePeripheralManager = step { return releasePeripheralManager() }
        guard let (manager, _) = await ensurePeripheralManager(), let service, let characteristic = notifyCharacteristic
        else { return }
        switch step {
        case .addService:
            serviceWanted = true
            await launch("peripheralManager.addService", role: .peripheral, cancel: .never) {
                try await manager.addService(service)
                return "added"
            }
        case .removeService:
            serviceWanted = false
            manager.remove(service)
            for index in centralModels.indices { centralModels[index].subscribed = false }
        case .startAdvertising:
            advertisingWanted = true
            let data = AdvertisementData(localName: "IL", serviceUUIDs: [BluetoothUUID(0xABCD)])
            await launch("peripheralManager.startAdvertising(with:)", role: .peripheral, cancel: .never) {
                try await manager.startAdvertising(with: data)
                return "advertising"
            }
        case .stopAdvertising:
            advertisingWanted = false
            manager.stopAdvertising()
        case .updateValue(let count):
            for index in 0..<count
            where !manager.updateValue(Data([UInt8(index & 0xFF)]), for: characteristic, onSubscribedCentrals: nil) {
                break
            }
        case .requestsStream:
            let requests = manager.requests()
            consume("peripheralManager.requests()", role: .peripheral) { for await _ in requests {} }
        case .centralSubscribes(let index):
            await subscribe(index)
        case .centralUnsubscribes(let index):
            let central = centrals[index]
            await bounded { try? await central.unsubscribe(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01") }
            centralModels[index].subscribed = false
        case .centralDisconnects(let index):
            let central = centrals[index]
            await bounded { await central.disconnect() }
            centralModels[index].connected = false
            centralModels[index].subscribed = false
        case .centralReconnects(let index):
            centralModels[index].connected = centrals[index].connect() || centralModels[index].connected
        case .centralWrites(let index):
            let central = centrals[index]
            await bounded {
                try? await central.write(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01", value: [0x01])
            }
        default:
            break
        }
    }

    private func subscribe(_ index: Int) async {
        let central = centrals[index]
        let subscribed = PosixMutex<AsyncStream<[UInt8]>?>(nil)
        await bounded {
            let values = try? await central.subscribe(serviceUUID: Self.serviceUUID, characteristicUUID: "ab01")
            subscribed.withLock { $0 = values }
        }
        guard let values = subscribed.withLock({ $0 }) else { return }
        centralModels[index].subscribed = true
        centralDrains.append(Task { for await _ in values {} })
    }

    private func releasePeripheralManager() {
        guard let peripheralManager else { return }
        releasedPeripheralManagers.append((peripheralGeneration, Weak(peripheralManager)))
        self.peripheralManager = nil
        peripheralRecorder = nil
        service = nil
        notifyCharacteristic = nil
        serviceWanted = false
        advertisingWanted = nil
        for index in centralModels.indices { centralModels[index].subscribed = false }
    }
}
