// uart-bridge: a Nordic UART Service peripheral and central on BlueZ, written with BlueZKit,
// that measures the throughput of an echo.
//
//   uart-bridge peripheral [--adapter hciN] [--name NAME] [--json]
//   uart-bridge central [--adapter hciN] [--name NAME] [--mode gatt|l2cap|both] [--bytes N] [--chunk N]
//               [--timeout S] [--json]
//
// The peripheral publishes an L2CAP channel and the Nordic UART Service (RX, TX and the
// channel's PSM in Apple's PSM characteristic), advertises, and echoes what centrals send:
// RX writes as TX notifications, channel data on the channel. The central finds it, sends N
// bytes of a deterministic pattern (64 KiB by default) through RX with writes without response
// (gatt), through the channel (l2cap) or both in turn (both), checks the echo byte for byte and prints the
// throughput; it exits 0 only when everything came back intact, 1 otherwise (or when the echo
// stalls for --timeout seconds). Stops cleanly on SIGINT/SIGTERM. Uses the system bus, or the
// one in DBUS_SYSTEM_BUS_ADDRESS.
import Dispatch
import Foundation
import HeartRateProfile
import UARTProfile

let options: BridgeOptions
do {
    options = try BridgeOptions(parsing: Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("\(error)\n\(BridgeOptions.usage)\n".utf8))
    exit(2)
}
if options.help {
    print(BridgeOptions.usage)
    exit(0)
}
let output = EventOutput(json: options.json)

switch options.role {
case .peripheral:
    let peripheral = UARTPeripheral(
        configuration: UARTPeripheral.Configuration(
            adapter: options.adapter, name: options.name ?? UARTProfile.defaultName),
        output: output)
    let signalSources = Termination.onSignal { exitNow in peripheral.stop(exitNow) }
    peripheral.start()
    withExtendedLifetime(signalSources) { dispatchMain() }
case .central:
    let central = UARTCentral(
        configuration: UARTCentral.Configuration(
            adapter: options.adapter, name: options.name, modes: options.modes, bytes: options.bytes,
            chunk: options.chunk, stallTimeout: .seconds(options.timeoutSeconds)),
        output: output)
    let signalSources = Termination.onSignal { exitNow in central.stop(exitNow) }
    central.start()
    withExtendedLifetime(signalSources) { dispatchMain() }
}
