import Foundation
import TestSupport
import Testing

/// The example programs as an ordinary user, on the guest's real bluetoothd and dbus-daemon with
/// Debian's own D-Bus policy for `org.bluez` (`/etc/dbus-1/system.d/bluetooth.conf` of the bluez
/// package, as installed): `nobody`, with no capabilities (`setpriv` drops them with the root
/// user), in the `bluetooth` group or in no group at all. In the serialized end-to-end suite:
/// every test uses hci0 and hci1.
///
/// Debian's policy (5.66 and 5.82 alike) lets root own `org.bluez` and lets the `bluetooth`
/// group *and every other user* (`<policy context="default">`) send to it; bluetoothd checks no
/// caller's identity; the kernel lets anyone bind an LE L2CAP socket to a dynamic PSM
/// (0x80–0xFF; only fixed PSMs below 0x80 need `CAP_NET_BIND_SERVICE`). So an ordinary user
/// needs nothing more, and these tests prove it.
extension EndToEndTests {
    /// The example executables copied where `nobody` can run them (the build directory may sit
    /// under a home directory it cannot enter, as /root in CI's chroot).
    static func unprivilegedCopy(of name: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluezkit-unprivileged")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let copy = directory.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: ExampleProgram.buildDirectory.appendingPathComponent(name), to: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
        return copy.path
    }

    /// Starts example `name` as `nobody`, in the `bluetooth` group alone or in no group.
    static func unprivileged(_ name: String, inBluetoothGroup: Bool, _ arguments: [String]) throws -> ExampleProgram {
        let executable = try unprivilegedCopy(of: name)
        let groups = inBluetoothGroup ? "--groups=bluetooth" : "--clear-groups"
        return try ExampleProgram(
            path: "/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", groups, "--", executable] + arguments,
            busAddress: nil, environment: ["HOME": "/nonexistent", "BLUEZKIT_LOG": "debug"])
    }

    /// Who the program runs as, from /proc: its real and effective user IDs, its groups and its
    /// effective capabilities.
    static func credentials(of program: ExampleProgram) throws -> (uids: [Int], groups: [Int], capabilities: UInt64) {
        let status = try String(contentsOfFile: "/proc/\(program.pid)/status", encoding: .utf8)
        func field(_ name: String) -> [Substring] {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }?.dropFirst(name.count + 1)
                .split(whereSeparator: \.isWhitespace) ?? []
        }
        return (
            field("Uid").compactMap { Int($0) }, field("Groups").compactMap { Int($0) },
            UInt64(field("CapEff").first ?? "", radix: 16) ?? .max
        )
    }

    /// The uid of `nobody` and the gid of `bluetooth`, from the guest's databases.
    static func nobodyAndBluetoothGroup() throws -> (uid: Int, bluetooth: Int) {
        guard let user = getpwnam("nobody"), let group = getgrnam("bluetooth") else {
            throw ExampleProgramError(description: "no user nobody or no group bluetooth in the guest")
        }
        return (Int(user.pointee.pw_uid), Int(group.pointee.gr_gid))
    }

    /// heart-rate-peripheral (in the `bluetooth` group) and heart-rate-central (in no group at
    /// all) as `nobody`: the peripheral publishes and advertises, the central scans, connects,
    /// reads and subscribes, and readings flow.
    @Test(.loadScaledTimeLimit(minutes: 3)) func heartRateExamplesRunAsAnOrdinaryUser() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let (nobody, bluetooth) = try Self.nobodyAndBluetoothGroup()
        let peripheral = try Self.unprivileged(
            "heart-rate-peripheral", inBluetoothGroup: true,
            ["--json", "--adapter", "hci1", "--name", "User HRM", "--interval-ms", "300"])
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        let central = try Self.unprivileged(
            "heart-rate-central", inBluetoothGroup: false,
            ["--json", "--adapter", "hci0", "--name", "User HRM", "--count", "3"])
        try await central.waitForEvents("scanning", timeout: .seconds(30))

        let asPeripheral = try Self.credentials(of: peripheral)
        let asCentral = try Self.credentials(of: central)
        #expect(asPeripheral.uids.allSatisfy { $0 == nobody } && asPeripheral.uids.count == 4)
        #expect(asPeripheral.groups == [bluetooth])
        #expect(asPeripheral.capabilities == 0)
        #expect(asCentral.uids.allSatisfy { $0 == nobody } && asCentral.uids.count == 4)
        #expect(asCentral.groups.isEmpty)
        #expect(asCentral.capabilities == 0)

        try await Self.expectHeartRateSession(central: central, peripheral: peripheral)
    }

    /// uart-bridge through an L2CAP channel, both ends as `nobody` in the `bluetooth` group: the
    /// peripheral listens on a dynamic PSM and publishes it, the central opens the channel, and
    /// every byte comes back.
    @Test(.loadScaledTimeLimit(minutes: 4)) func anL2CAPChannelWorksForAnOrdinaryUser() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let (nobody, _) = try Self.nobodyAndBluetoothGroup()
        let bytes = 16_384
        let peripheral = try Self.unprivileged(
            "uart-bridge", inBluetoothGroup: true, ["peripheral", "--json", "--adapter", "hci1", "--name", "User UART"])
        try await peripheral.waitForEvents("advertising", timeout: .seconds(30))
        #expect(try Self.credentials(of: peripheral).uids.allSatisfy { $0 == nobody })
        let central = try Self.unprivileged(
            "uart-bridge", inBluetoothGroup: true,
            [
                "central", "--json", "--adapter", "hci0", "--name", "User UART", "--mode", "l2cap", "--bytes",
                "\(bytes)", "--timeout", "30",
            ])
        let results = try await central.waitForEvents("result", timeout: .seconds(120))
        let result = try #require(results.first)
        #expect(result["mode"] as? String == "l2cap")
        #expect(result["intact"] as? Bool == true)
        #expect(result["bytes"] as? Int == bytes)
        let psm = try #require(central.events("psm").first?["psm"] as? Int)
        #expect((0x80...0xFF).contains(psm))
        #expect(peripheral.events("l2capPublished").first?["psm"] as? Int == psm)
        try await pollUntil("the central exits after its transfer", timeout: .seconds(30)) { central.status != nil }
        #expect(central.status == 0, "\(central.diagnostics())")
        #expect(try await peripheral.stop() == 0, "\(peripheral.diagnostics())")
        #expect(central.events("error").isEmpty && peripheral.events("error").isEmpty)
    }
}
