// heart-rate-central: a BLE heart-rate monitor on BlueZ, written with BlueZKit.
//
//   heart-rate-central [--adapter hciN] [--name NAME] [--id UUID] [--restore-id ID] [--count N] [--notify-sockets] [--json]
//
// Scans for the Heart Rate service (0x180D), connects to the first sensor (or the one
// named by --name / --id), reads Body Sensor Location, subscribes to Heart Rate
// Measurement and prints every reading. When the link drops it connects again and waits
// for the sensor, with no timeout. --restore-id keeps its state across restarts: the next
// run takes the sensor from willRestoreState instead of scanning. Uses the system bus, or
// the one in DBUS_SYSTEM_BUS_ADDRESS. --notify-sockets receives the measurements through
// AcquireNotify's socket (CentralManagerOptions.usesNotifySockets) instead of StartNotify.
import Dispatch
import Foundation
import HeartRateProfile

let usage =
    "usage: heart-rate-central [--adapter hciN] [--name NAME] [--id UUID] [--restore-id ID] [--count N] [--notify-sockets] [--json]"
let options: CommandLineOptions
var configuration = HeartRateMonitor.Configuration()
do {
    options = try CommandLineOptions(
        Array(CommandLine.arguments.dropFirst()),
        valued: ["--adapter", "--name", "--id", "--restore-id", "--count"],
        flags: ["--json", "--notify-sockets", "--help"])
    if options.value("--count") != nil { configuration.count = try options.positiveInteger("--count", default: 1) }
    if let text = options.value("--id") {
        guard let identifier = UUID(uuidString: text) else { throw UsageError.invalidIdentifier(text) }
        configuration.identifier = identifier
    }
} catch {
    FileHandle.standardError.write(Data("\(error)\n\(usage)\n".utf8))
    exit(2)
}
if options.flag("--help") {
    print(usage)
    exit(0)
}
configuration.adapter = options.value("--adapter")
configuration.name = options.value("--name")
configuration.restoreIdentifier = options.value("--restore-id")
configuration.usesNotifySockets = options.flag("--notify-sockets")

let monitor = HeartRateMonitor(configuration: configuration, output: EventOutput(json: options.flag("--json")))
let signalSources = Termination.onSignal { exitNow in monitor.stop(exitNow) }
monitor.start()
dispatchMain()
