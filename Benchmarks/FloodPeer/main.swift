// flood-peer: the BlueZKit side of Scripts/benchmark-flood's slow floods, through the real
// bluetoothd, using only BlueZKit's public API. It keeps nothing it receives.
//
//   flood-peer peripheral [--adapter hciN] [--name N] [--delegate-delay-ms D]
//   flood-peer notifier [--adapter hciN] [--name N] [--value-bytes B]
//   flood-peer central [--adapter hciN] [--name N] [--delegate-delay-ms D]
//
// peripheral: a Nordic-UART-like service whose RX takes writes and writes without response;
// the delegate sleeps D ms (default 20) per didReceiveWrite batch and drops the data.
// notifier: the same service with TX (notify); once a central subscribes, it calls updateValue
// with values of B bytes (default 244, at most 512) as fast as
// peripheralManagerIsReady(toUpdateSubscribers:) allows.
// central: finds the peripheral advertising the service (and --name), connects, subscribes to
// TX; its peripheral(_:didUpdateValueFor:error:) sleeps D ms per value and keeps nothing.
//
// One JSON line per event on standard output: {"event": "advertising"} or {"event":
// "subscribed"} once ready, then every second {"event": "count", ...} with the totals so far,
// and the same totals as {"event": "final", ...} on SIGTERM or SIGINT. BlueZKit's warnings
// (what its bounds dropped) go to standard error.
import Dispatch
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
let usage =
    "usage: flood-peer peripheral|notifier|central [--adapter hciN] [--name NAME] [--delegate-delay-ms D] [--value-bytes B]"

/// The value after `flag`, if given.
func option(_ flag: String) -> String? {
    guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

guard let role = arguments.first, ["peripheral", "notifier", "central"].contains(role) else {
    FileHandle.standardError.write(Data("\(usage)\n".utf8))
    exit(2)
}
let adapter = option("--adapter")
let name = option("--name") ?? "Flood"
guard let delayMilliseconds = Int(option("--delegate-delay-ms") ?? "20"), delayMilliseconds >= 0 else {
    FileHandle.standardError.write(Data("--delegate-delay-ms takes a whole number\n\(usage)\n".utf8))
    exit(2)
}
guard let valueLength = Int(option("--value-bytes") ?? "244"), (1...512).contains(valueLength) else {
    FileHandle.standardError.write(Data("--value-bytes takes 1 to 512\n\(usage)\n".utf8))
    exit(2)
}
let delay = TimeInterval(delayMilliseconds) / 1000
let counters = FloodCounters()

let running: AnyObject
switch role {
case "central":
    let central = FloodCentral(adapter: adapter, name: name, delay: delay, counters: counters)
    central.start()
    running = central
default:
    let peripheral = FloodPeripheral(
        adapter: adapter, name: name, notifies: role == "notifier", delay: delay, valueLength: valueLength,
        counters: counters)
    peripheral.start()
    running = peripheral
}

let reporting = counters.startReporting()
withExtendedLifetime((running, reporting)) { dispatchMain() }
