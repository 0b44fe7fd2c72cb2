// heart-rate-peripheral: a BLE heart-rate sensor on BlueZ, written with BlueZKit.
//
//   heart-rate-peripheral [--adapter hciN] [--name NAME] [--interval-ms N] [--restore-id ID] [--json]
//
// Publishes the Heart Rate (0x180D), Device Information (0x180A) and Battery (0x180F)
// services, advertises its name and 0x180D, and sends a heart rate to subscribed centrals
// every interval. Stops cleanly on SIGINT/SIGTERM. Uses the system bus, or the one in
// DBUS_SYSTEM_BUS_ADDRESS.
import Dispatch
import Foundation
import HeartRateProfile

let usage = "usage: heart-rate-peripheral [--adapter hciN] [--name NAME] [--interval-ms N] [--restore-id ID] [--json]"
let options: CommandLineOptions
var configuration = HeartRateSensor.Configuration()
do {
    options = try CommandLineOptions(
        Array(CommandLine.arguments.dropFirst()),
        valued: ["--adapter", "--name", "--interval-ms", "--restore-id"], flags: ["--json", "--help"])
    configuration.interval = .milliseconds(try options.positiveInteger("--interval-ms", default: 1000))
} catch {
    FileHandle.standardError.write(Data("\(error)\n\(usage)\n".utf8))
    exit(2)
}
if options.flag("--help") {
    print(usage)
    exit(0)
}
configuration.adapter = options.value("--adapter")
configuration.name = options.value("--name") ?? configuration.name
configuration.restoreIdentifier = options.value("--restore-id")

let sensor = HeartRateSensor(configuration: configuration, output: EventOutput(json: options.flag("--json")))
let signalSources = Termination.onSignal { exitNow in sensor.stop(exitNow) }
sensor.start()
dispatchMain()
