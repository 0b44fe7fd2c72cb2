import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Advertising options (``AdvertisingOptions``) against the simulated bluetoothd, per version and
/// controller: what bluetoothd took, the typed refusals made before asking it, its own refusal,
/// and restoration.
@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerAdvertisingOptionsTests {
    static let service = BluetoothUUID(string: "5A1E0601-B1E2-4C00-9E00-000000000002")
    static let data = AdvertisementData(serviceUUIDs: [service])

    /// A simulated bluetoothd of `version` with one adapter, and a powered-on manager on it.
    static func start(
        _ version: SimulatedBlueZ.Version, extended: Bool, experimental: Bool = false
    ) async throws -> (SimulatedBlueZ, SimulatedAdapter, PeripheralManager) {
        var configuration = SimulatedAdapter.Configuration()
        configuration.extendedAdvertising = extended
        let bluez = try await SimulatedBlueZ.start(
            adapters: [configuration], options: .init(version: version, advertisementMonitor: experimental))
        let manager = PeripheralManager(
            delegate: nil, queue: nil, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        return (bluez, try #require(bluez.adapters.first), manager)
    }

    /// The code of the error `startAdvertising` throws, or nil when it advertised.
    static func refusal(_ manager: PeripheralManager, _ options: AdvertisingOptions, data: AdvertisementData = data)
        async -> BluetoothError.Code?
    {
        do {
            try await manager.startAdvertising(with: data, options: options)
            return nil
        } catch {
            return (error as? BluetoothError)?.code ?? .unknown
        }
    }

    @Test(arguments: [SimulatedBlueZ.Version.bluez5_82, .bluez5_87])
    func anExtendedControllerTakesEveryOption(version: SimulatedBlueZ.Version) async throws {
        let (bluez, adapter, manager) = try await Self.start(version, extended: true)
        defer { bluez.stop() }
        let options = AdvertisingOptions(
            interval: .milliseconds(100) ... .milliseconds(150), txPower: -4, includesTxPower: true,
            secondaryPHY: .le2M)
        try await manager.startAdvertising(with: Self.data, options: options)
        let advertisement = try #require(adapter.registeredAdvertisements.first)
        #expect(advertisement.minimumInterval == 100)
        #expect(advertisement.maximumInterval == 150)
        #expect(advertisement.txPower == -4)
        #expect(advertisement.includes == ["tx-power"])
        #expect(advertisement.secondaryChannel == "2M")
        #expect(manager.advertisingOptions == options)
        manager.stopAdvertising()
        #expect(manager.advertisingOptions == nil)
    }

    @Test func aLegacyControllerRefusesASecondaryPHYAndATxPowerBeforeBluetoothdIsAsked() async throws {
        let (bluez, adapter, manager) = try await Self.start(.bluez5_82, extended: false)
        defer { bluez.stop() }
        for phy in AdvertisingOptions.SecondaryPHY.allCases {
            #expect(await Self.refusal(manager, AdvertisingOptions(secondaryPHY: phy)) == .operationNotSupported)
        }
        #expect(await Self.refusal(manager, AdvertisingOptions(txPower: 0)) == .operationNotSupported)
        #expect(adapter.registeredAdvertisements.isEmpty)
        #expect(!manager.isAdvertising)
        // Intervals need no extended advertising.
        #expect(
            await Self.refusal(manager, AdvertisingOptions(interval: .milliseconds(20) ... .milliseconds(20))) == nil)
        #expect(adapter.registeredAdvertisements.first?.minimumInterval == 20)
    }

    @Test func bluetoothd566WithoutExperimentalWouldIgnoreIntervalsSoTheyAreRefused() async throws {
        let (bluez, adapter, manager) = try await Self.start(.bluez5_66, extended: true)
        defer { bluez.stop() }
        let interval = AdvertisingOptions(interval: .milliseconds(100) ... .milliseconds(100))
        #expect(await Self.refusal(manager, interval) == .operationNotSupported)
        #expect(await Self.refusal(manager, AdvertisingOptions(txPower: 0)) == .operationNotSupported)
        #expect(adapter.registeredAdvertisements.isEmpty)
        // The secondary channel is not experimental.
        #expect(await Self.refusal(manager, AdvertisingOptions(secondaryPHY: .leCoded)) == nil)
        #expect(adapter.registeredAdvertisements.first?.secondaryChannel == "Coded")
    }

    @Test func bluetoothd566WithExperimentalTakesIntervals() async throws {
        let (bluez, adapter, manager) = try await Self.start(.bluez5_66, extended: true, experimental: true)
        defer { bluez.stop() }
        let options = AdvertisingOptions(interval: .milliseconds(40) ... .milliseconds(60), txPower: 5)
        #expect(await Self.refusal(manager, options) == nil)
        let advertisement = try #require(adapter.registeredAdvertisements.first)
        #expect(advertisement.minimumInterval == 40)
        #expect(advertisement.maximumInterval == 60)
        #expect(advertisement.txPower == 5)
    }

    @Test func valuesOutsideBluetoothdsRangesAreInvalid() async throws {
        let (bluez, adapter, manager) = try await Self.start(.bluez5_82, extended: true)
        defer { bluez.stop() }
        for options in [
            AdvertisingOptions(interval: .milliseconds(19) ... .milliseconds(100)),
            AdvertisingOptions(interval: .milliseconds(100) ... .seconds(10_486)),
            AdvertisingOptions(txPower: 21), AdvertisingOptions(txPower: -128),
        ] {
            #expect(await Self.refusal(manager, options) == .invalidParameters, "\(options)")
        }
        #expect(adapter.registeredAdvertisements.isEmpty)
    }

    @Test func bluetoothdsOwnRefusalOfTheOptionsIsInvalidParameters() async throws {
        let (bluez, _, manager) = try await Self.start(.bluez5_82, extended: true)
        defer { bluez.stop() }
        bluez.inject(
            .error(name: "org.bluez.Error.Failed", message: "Failed to parse advertisement."),
            for: PeripheralManagerCleanupTests.registerAdvertisement)
        #expect(await Self.refusal(manager, AdvertisingOptions(secondaryPHY: .le2M)) == .invalidParameters)
    }

    @Test func dataBeyond31BytesNeedsAnExtendedControllerAndBluetoothd582() async throws {
        let long = AdvertisementData(manufacturerData: Data([0xFF, 0xFF] + [UInt8](repeating: 7, count: 98)))
        let (bluez, adapter, manager) = try await Self.start(.bluez5_82, extended: true)
        defer { bluez.stop() }
        #expect(await Self.refusal(manager, AdvertisingOptions(), data: long) == nil)
        #expect(adapter.registeredAdvertisements.first?.manufacturerData[0xFFFF]?.count == 98)

        let (old, _, oldManager) = try await Self.start(.bluez5_66, extended: true)
        defer { old.stop() }
        #expect(await Self.refusal(oldManager, AdvertisingOptions(), data: long) == .advertisingDataTooLarge)
    }

    @Test func theOptionsAreRestoredWithTheAdvertisement() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluezkit-advopts-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = SimulatedAdapter.Configuration()
        configuration.extendedAdvertising = true
        let bluez = try await SimulatedBlueZ.start(adapters: [configuration], options: .init(version: .bluez5_82))
        defer { bluez.stop() }
        let adapter = try #require(bluez.adapters.first)
        let managerOptions = PeripheralManagerOptions(
            restoreIdentifier: "advertising-options", busAddress: bluez.busAddress,
            restorationStore: RestorationStore(directory: directory))
        let options = AdvertisingOptions(
            interval: .milliseconds(250) ... .milliseconds(300), txPower: -8, secondaryPHY: .leCoded)
        let released = PeripheralRestorationTests.WeakManager()
        do {
            let manager = PeripheralManager(delegate: nil, queue: nil, options: managerOptions)
            released.value = manager
            try await waitUntil("powered on") { manager.state == .poweredOn }
            try await manager.startAdvertising(with: Self.data, options: options)
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        try await waitUntil("its advertisement is gone") { adapter.registeredAdvertisements.isEmpty }

        let manager = PeripheralManager(delegate: nil, queue: nil, options: managerOptions)
        try await waitUntil("advertising again") { !adapter.registeredAdvertisements.isEmpty }
        let advertisement = try #require(adapter.registeredAdvertisements.first)
        #expect(advertisement.minimumInterval == 250)
        #expect(advertisement.maximumInterval == 300)
        #expect(advertisement.txPower == -8)
        #expect(advertisement.secondaryChannel == "Coded")
        #expect(manager.advertisingOptions == options)
    }
}
