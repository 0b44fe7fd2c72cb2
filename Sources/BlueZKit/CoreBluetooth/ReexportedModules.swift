// `import CoreBluetooth` brings Foundation (NSObject, NSNumber, Data, UUID, Timer, TimeInterval)
// and Dispatch with it on Apple's platforms, and code written for it relies on that: a
// `class Scanner: NSObject, CBCentralManagerDelegate` in a file that imports CoreBluetooth alone.
// So `import BlueZKit` brings them too (CoreBluetoothImportTests compiles such a file).
@_exported public import Dispatch
@_exported public import Foundation
