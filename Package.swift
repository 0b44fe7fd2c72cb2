// swift-tools-version:6.0
import PackageDescription

/// Every Swift target: Swift 6 language mode (set package-wide below), strict
/// concurrency, and imports that are internal unless a signature needs them.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "BlueZKit",
    products: [
        .library(name: "BlueZKit", targets: ["BlueZKit"]),
        .library(name: "BlueZKitTesting", targets: ["BlueZKitTesting"]),
        .executable(name: "heart-rate-peripheral", targets: ["HeartRatePeripheral"]),
        .executable(name: "heart-rate-central", targets: ["HeartRateCentral"]),
        .executable(name: "uart-bridge", targets: ["UARTBridge"]),
        .executable(name: "flood-peer", targets: ["FloodPeer"]),
    ],
    targets: [
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // PosixMutex, the package's lock (ThreadSanitizer follows it), for every module.
        .target(
            name: "Locking",
            swiftSettings: strictSettings
        ),
        .target(
            name: "DBus",
            dependencies: ["CDBus", "Locking"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "BlueZ",
            dependencies: ["DBus", "Locking"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "BlueZKit",
            dependencies: ["BlueZ", "Locking"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BlueZKitTests",
            dependencies: [
                "BlueZKit", "BlueZ", "BlueZKitTesting", "DBus", "TestSupport", "CoreBluetoothPort",
                "CoreBluetoothPortSwift5", "Locking", "BluetoothdConformance",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "BlueZKit", "HeartRateProfile", "TestSupport", "CoreBluetoothPort", "CoreBluetoothPortSwift5",
                "BluetoothdConformance", "DBus",
                // The UART bridge's test pattern and frames, to check what a Bumble peer received.
                "UARTProfile",
            ],
            swiftSettings: strictSettings
        ),
        // Code written for Apple's Core Bluetooth (a heart-rate central and peripheral) with only
        // its import line changed, compiled in both language modes from the same files: the
        // second directory is a symbolic link to the first. No upcoming features: it is written
        // as an iOS app is.
        .target(
            name: "CoreBluetoothPort",
            dependencies: ["BlueZKit"],
            path: "Tests/CoreBluetoothPort"
        ),
        .target(
            name: "CoreBluetoothPortSwift5",
            dependencies: ["BlueZKit"],
            path: "Tests/CoreBluetoothPortSwift5",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // An iOS app's BLE manager as iOS developers write it (NSObject delegate on the main queue,
        // %@ logging, isEqual, a Timer reading the RSSI, connect during the scan, its own
        // descriptions of Core Bluetooth's enums), importing BlueZKit only, as two programs from
        // the same files (the second directory is a symbolic link to the first). Programs, not
        // libraries: its `extension CBManagerState: CustomStringConvertible` would otherwise
        // change how every test in the test bundle prints a state (conformances are
        // process-wide), and its Timer needs the main run loop, which its main.swift runs.
        .executableTarget(
            name: "CoreBluetoothPortIOS",
            dependencies: ["BlueZKit"],
            path: "Tests/CoreBluetoothPortIOS"
        ),
        .executableTarget(
            name: "CoreBluetoothPortIOSSwift5",
            dependencies: ["BlueZKit"],
            path: "Tests/CoreBluetoothPortIOSSwift5",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "BlueZKitTesting",
            dependencies: ["DBus", "Locking"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BlueZKitTestingTests",
            dependencies: ["BlueZKitTesting", "DBus", "TestSupport", "Locking"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "DBusBenchmark",
            dependencies: ["DBus"],
            path: "Benchmarks/DBusBenchmark",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ObjectCacheBenchmark",
            dependencies: ["BlueZ", "DBus"],
            path: "Benchmarks/ObjectCacheBenchmark",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ScanMemoryBenchmark",
            dependencies: ["BlueZKit", "BlueZKitTesting"],
            path: "Benchmarks/ScanMemoryBenchmark",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "NotifySocketBenchmark",
            dependencies: ["BlueZKit", "BlueZKitTesting", "DBus"],
            path: "Benchmarks/NotifySocketBenchmark",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "PeripheralUpdateBenchmark",
            dependencies: ["BlueZKit", "BlueZKitTesting"],
            path: "Benchmarks/PeripheralUpdateBenchmark",
            swiftSettings: strictSettings
        ),
        // The statistics and the JSON of Scripts/benchmark and Scripts/benchmark-dbus.
        .executableTarget(
            name: "BenchmarkReport",
            path: "Benchmarks/BenchmarkReport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "BenchmarkReportTests",
            dependencies: ["BenchmarkReport"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "L2CAPBenchmark",
            dependencies: ["BlueZKit"],
            path: "Benchmarks/L2CAPBenchmark",
            swiftSettings: strictSettings
        ),
        // One central reading many heart-rate sensors (Scripts/benchmark --only gateway).
        .executableTarget(
            name: "GatewayBenchmark",
            dependencies: ["BlueZKit"],
            path: "Benchmarks/GatewayBenchmark",
            swiftSettings: strictSettings
        ),
        // The wake-up floor (Scripts/benchmark-wakeup-floor): the library's notification paths
        // alone, beside C and Python, in the emulated BlueZ environment.
        .executableTarget(
            name: "WakeupFloor",
            dependencies: ["BlueZ", "DBus"],
            path: "Benchmarks/WakeupFloor",
            swiftSettings: strictSettings
        ),
        // Memory and state-file writes under a flooding peer (Scripts/benchmark --only flood).
        .executableTarget(
            name: "FloodBenchmark",
            dependencies: ["BlueZKit", "BlueZKitTesting"],
            path: "Benchmarks/FloodBenchmark",
            swiftSettings: strictSettings
        ),
        // The BlueZKit side of Scripts/benchmark-flood's slow floods (real bluetoothd): a
        // peripheral and a central whose delegates answer slowly and keep nothing, a notifier.
        .executableTarget(
            name: "FloodPeer",
            dependencies: ["BlueZKit"],
            path: "Benchmarks/FloodPeer",
            swiftSettings: strictSettings
        ),
        // A simulated heart-rate sensor feeding a central run under a profiler on this machine
        // (Scripts/profile-notify-path): heart-rate-central beside the C floor, no guest.
        .executableTarget(
            name: "NotifyPathProfile",
            dependencies: ["BlueZKitTesting"],
            path: "Benchmarks/NotifyPathProfile",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "PendingConnectBenchmark",
            dependencies: ["BlueZKit"],
            path: "Benchmarks/PendingConnectBenchmark",
            swiftSettings: strictSettings
        ),
        // The examples: two programs and the heart-rate profile they share.
        .target(
            name: "HeartRateProfile",
            dependencies: ["BlueZKit"],
            path: "Examples/HeartRateProfile",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "HeartRatePeripheral",
            dependencies: ["BlueZKit", "HeartRateProfile"],
            path: "Examples/HeartRatePeripheral",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "HeartRateCentral",
            dependencies: ["BlueZKit", "HeartRateProfile"],
            path: "Examples/HeartRateCentral",
            swiftSettings: strictSettings
        ),
        // The third example: a Nordic UART Service bridge (both roles in one program) and the
        // pattern, echo check and throughput it measures with.
        .target(
            name: "UARTProfile",
            dependencies: ["BlueZKit", "HeartRateProfile"],
            path: "Examples/UARTProfile",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "UARTBridge",
            dependencies: ["BlueZKit", "HeartRateProfile", "UARTProfile"],
            path: "Examples/UARTBridge",
            swiftSettings: strictSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: ["Locking"],
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        // Conformance bodies: checks of bluetoothd's D-Bus behaviour that run unchanged against the
        // simulator (BlueZKitTests) and the real bluetoothd (EndToEndTests). D-Bus only: no
        // BlueZKitTesting, so a body cannot lean on the simulator.
        .target(
            name: "BluetoothdConformance",
            dependencies: ["DBus", "TestSupport", "Locking"],
            path: "Tests/BluetoothdConformance",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ExampleTests",
            dependencies: ["HeartRateProfile", "UARTProfile", "BlueZKit", "BlueZKitTesting", "TestSupport", "Locking"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DBusTests",
            dependencies: ["DBus", "TestSupport", "Locking"],
            swiftSettings: strictSettings
        ),
        // The BlueZ layer's own tests (agent, object cache, client, errors, sockets, vocabulary)
        // against a private bus; named BlueZAgentTests until it held more than the agent's.
        .testTarget(
            name: "BlueZTests",
            dependencies: ["BlueZ", "DBus", "TestSupport", "Locking"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
