internal import DBus

/// One adapter as the simulated bluetoothd holds it (`struct btd_adapter`).
struct AdapterState: Sendable {
    /// A client that set a filter or holds a discovery session (`struct discovery_client`).
    struct DiscoveryClient: Sendable {
        var owner: String
        var filter: DiscoveryFilter?
        var discovering: Bool
        /// Its `StartDiscovery` is not answered yet (`client->msg`): bluetoothd then answers its
        /// `StopDiscovery` with InProgress.
        var startPending = false
    }

    let name: String
    let path: ObjectPath
    let address: String
    var configuration: SimulatedAdapter.Configuration
    var alias: String?
    var powered: Bool
    var discoverable: Bool
    var discoverableTimeout: UInt32 = 180
    var pairable: Bool
    var pairableTimeout: UInt32 = 0
    /// Clients with a pre-set filter or a session, oldest first.
    var clients: [DiscoveryClient] = []
    var discovering = false
    /// The filter the kernel scans with; nil for a regular discovery.
    var kernelFilter: KernelFilter?
    /// Devices reported during this discovery, whose RSSI is invalidated when it stops, each with
    /// its rank in the order they were first reported (a dictionary: a long scan of ever new
    /// devices looks them up and removes them once per advertisement).
    var discoveryFound: [ObjectPath: Int] = [:]
    /// The rank of the next device in `discoveryFound`.
    var discoveryFoundCount = 0
    /// Set when a client's `Discoverable` filter made the adapter discoverable for the discovery.
    var discoverableForDiscovery = false

    init(name: String, address: String, configuration: SimulatedAdapter.Configuration) {
        self.name = name
        self.path = SimulatorCore.adapterPath(name)
        self.address = address
        self.configuration = configuration
        self.powered = configuration.powered
        self.discoverable = configuration.discoverable
        self.pairable = configuration.pairable
    }

    var sessions: [DiscoveryClient] { clients.filter(\.discovering) }

    /// The transports a discovery covers (`get_scan_type`): LE, and BR/EDR on a dual-mode controller.
    var scanType: UInt8 { configuration.dualMode ? DiscoveryFilter.auto : DiscoveryFilter.le }

    /// Whether the kernel scan uses a filter (`filtered_discovery`).
    var filteredDiscovery: Bool { discovering && kernelFilter != nil }

    var deviceClass: UInt32 { powered ? configuration.deviceClass : 0 }

    /// The effective alias: the one set, else the system name.
    var effectiveAlias: String { alias ?? configuration.systemName }

    /// A copy for the public API.
    var snapshot: Snapshot { Snapshot(powered: powered, discovering: discovering, sessions: sessions.count) }

    struct Snapshot: Sendable {
        let powered: Bool
        let discovering: Bool
        let sessions: Int
    }
}
