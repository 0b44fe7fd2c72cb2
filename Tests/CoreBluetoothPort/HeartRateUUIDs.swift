// Written for Apple's Core Bluetooth, as the heart-rate tutorials write it; the only change
// for Linux is the import line (BlueZKit instead of CoreBluetooth). This directory is compiled
// twice: in Swift 6 language mode (target CoreBluetoothPort) and in Swift 5 language mode
// (target CoreBluetoothPortSwift5, a symbolic link to it).
import BlueZKit

let heartRateServiceCBUUID = CBUUID(string: "0x180D")
let heartRateMeasurementCharacteristicCBUUID = CBUUID(string: "2A37")
let bodySensorLocationCharacteristicCBUUID = CBUUID(string: "2A38")
let heartRateControlPointCharacteristicCBUUID = CBUUID(string: "2A39")
