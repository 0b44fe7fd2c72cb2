import BlueZKit
import Testing

// This file imports BlueZKit alone, as iOS code imports CoreBluetooth alone: NSObject, NSNumber,
// Timer, TimeInterval, Data and DispatchQueue must come with it, or this file does not compile.

/// A delegate written the way iOS code writes it: an `NSObject` subclass, a timer, a queue.
final class ImportOnlyScanner: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "test.import-only")
    var interval: TimeInterval = 0.5
    var lastRSSI: NSNumber = 0
    var timer: Timer?
    var payload = Data()

    func centralManagerDidUpdateState(_ central: CBCentralManager) {}
}

@Suite(.timeLimit(.minutes(1))) struct CoreBluetoothImportTests {
    @Test func foundationAndDispatchComeWithTheImport() {
        let scanner = ImportOnlyScanner()
        scanner.lastRSSI = NSNumber(value: -60)
        scanner.timer = Timer(timeInterval: scanner.interval, repeats: true) { _ in }
        #expect(scanner.lastRSSI.intValue == -60)
        #expect(scanner.timer?.timeInterval == 0.5)
        #expect(scanner.isEqual(scanner))
        scanner.timer?.invalidate()
    }
}
