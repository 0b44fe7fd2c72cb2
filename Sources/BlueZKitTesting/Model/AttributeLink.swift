import Locking

/// Ties an attribute to the peripheral that holds it, its ATT handle and its path below the device object.
final class AttributeLink: Sendable {
    private struct State {
        weak var peripheral: SimulatedPeripheral?
        var handle: UInt16 = 0
        var pathSuffix = ""
    }

    private let state = PosixMutex(State())

    func attach(to peripheral: SimulatedPeripheral, handle: UInt16, pathSuffix: String) {
        state.withLock {
            $0.peripheral = peripheral
            $0.handle = handle
            $0.pathSuffix = pathSuffix
        }
    }

    var peripheral: SimulatedPeripheral? { state.withLock { $0.peripheral } }
    var handle: UInt16 { state.withLock { $0.handle } }

    /// The attribute's object path: the device's path plus `/serviceXXXX[/charYYYY[/descZZZZ]]`.
    func objectPath() -> String? {
        let (peripheral, suffix) = state.withLock { ($0.peripheral, $0.pathSuffix) }
        guard let device = peripheral?.devicePath else { return nil }
        return device + suffix
    }
}
