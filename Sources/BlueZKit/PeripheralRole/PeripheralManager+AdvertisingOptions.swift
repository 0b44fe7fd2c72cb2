import BlueZ
import Foundation

/// Linux: advertising with an interval, a TX power and a secondary PHY (``AdvertisingOptions``).
extension PeripheralManager {
    /// Linux: starts advertising `data` with `options` (interval, TX power, TX power field,
    /// secondary PHY).
    ///
    /// As ``startAdvertising(_:)-(AdvertisementData)``, with the options as properties of the
    /// `LEAdvertisement1` that `LEAdvertisingManager1.RegisterAdvertisement` registers. The
    /// delegate's `peripheralManagerDidStartAdvertising` (on `queue`) gets
    /// ``BluetoothError/Code/invalidParameters`` for values outside bluetoothd's ranges or when
    /// bluetoothd refuses them, and ``BluetoothError/Code/operationNotSupported`` when the
    /// adapter's `LEAdvertisingManager1` shows that bluetoothd or the controller cannot do what
    /// is asked (see ``AdvertisingOptions``); the message says which.
    ///
    /// Data beyond a legacy advertisement's 31 bytes needs no option: from bluetoothd 5.79 it goes
    /// out as an extended advertisement where the controller reports a larger `MaxAdvLen`.
    public func startAdvertising(_ data: AdvertisementData, options: AdvertisingOptions) {
        startAdvertising(data, options: options, then: nil)
    }

    /// Linux: ``startAdvertising(_:options:)-(AdvertisementData,_)`` with Core Bluetooth's
    /// advertisement dictionary.
    public func startAdvertising(_ advertisementData: [String: Any]?, options: AdvertisingOptions) {
        let data: AdvertisementData
        do throws(AdvertisementDataError) {
            data = try AdvertisementData(dictionary: advertisementData ?? [:])
        } catch {
            let failure = BluetoothError(.invalidParameters, message: "\(error)")
            return post(.didStartAdvertising(failure, saves: false, done: nil))
        }
        startAdvertising(data, options: options, then: nil)
    }

    /// Linux: ``startAdvertising(_:options:)-(AdvertisementData,_)``, returning once bluetoothd
    /// took the advertisement (the delegate is called too, first).
    /// - Throws: the delegate's error (``BluetoothError``).
    public func startAdvertising(with data: AdvertisementData, options: AdvertisingOptions) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            startAdvertising(data, options: options) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Linux: the options of the current advertisement; nil when not advertising or advertising
    /// without options. Any thread (waits for the bus queue).
    public var advertisingOptions: AdvertisingOptions? { engine.sync { $0.advertisingOptions } }
}

extension PeripheralEngine {
    /// The error for options the adapter's `LEAdvertisingManager1` says bluetoothd or the
    /// controller cannot honour, or nil (see ``AdvertisingOptions``).
    func unsupportedAdvertisingOption(
        _ content: BlueZAdvertisement.Content, client: BlueZClient
    ) async -> BluetoothError? {
        let asksParameters = content.interval != nil || content.txPower != nil
        guard asksParameters || content.secondaryChannel != nil || content.includeTxPower else { return nil }
        let capabilities = await client.currentAdvertisingCapabilities()
        return Self.unsupportedAdvertisingOption(content, capabilities)
    }

    /// ``unsupportedAdvertisingOption(_:client:)`` for known capabilities (nil: no advertising manager).
    static func unsupportedAdvertisingOption(
        _ content: BlueZAdvertisement.Content, _ capabilities: BlueZAdvertisingCapabilities?
    ) -> BluetoothError? {
        func refuse(_ message: String) -> BluetoothError { BluetoothError(.operationNotSupported, message: message) }
        guard let capabilities else { return refuse("the adapter has no advertising manager") }
        if content.interval != nil || content.txPower != nil, !capabilities.honoursParameters {
            return refuse(
                "this bluetoothd ignores advertising intervals and TX power (before BlueZ 5.77 they need "
                    + "bluetoothd --experimental)")
        }
        if let power = content.txPower, !capabilities.canSetTxPower {
            return refuse(
                "the controller cannot set an advertisement's TX power (\(power) dBm asked; "
                    + "no CanSetTxPower: it does not do extended advertising)")
        }
        if content.includeTxPower, !capabilities.includes.contains("tx-power") {
            return refuse("the controller does not report its advertising TX power (no tx-power include)")
        }
        if let channel = content.secondaryChannel, !capabilities.secondaryChannels.contains(channel) {
            let supported = capabilities.secondaryChannels
            return refuse(
                "the controller does not advertise on a \(channel) secondary channel (it supports "
                    + (supported.isEmpty ? "none: no extended advertising" : supported.joined(separator: ", ")) + ")")
        }
        return nil
    }

    /// The delegate's error when `RegisterAdvertisement` failed: bluetoothd's refusal of an
    /// advertisement with options ("Failed to parse advertisement.") is `invalidParameters`.
    static func advertisingRefusal(_ error: BlueZError, _ content: BlueZAdvertisement.Content) -> BluetoothError {
        let hasOptions =
            content.interval != nil || content.txPower != nil || content.secondaryChannel != nil
        if hasOptions, error.code == .failed || error.code == .invalidArguments {
            return BluetoothError(
                .invalidParameters, message: "bluetoothd refused the advertising options: \(error.description)",
                underlying: error)
        }
        return BluetoothError(.unknown, message: error.description, underlying: error)
    }
}
