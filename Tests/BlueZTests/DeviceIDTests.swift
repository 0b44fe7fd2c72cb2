import BlueZ
import Testing

/// A saved device token (restoration files, which anyone who can write the file can change) names
/// a device only when it has bluetoothd's form: `…/dev_` and six pairs of hex digits.
@Suite(.timeLimit(.minutes(5))) struct DeviceIDTests {
    @Test func aTokenInBluetoothdsFormNamesItsDevice() throws {
        let id = try #require(BlueZClient.DeviceID(token: "/org/bluez/hci0/dev_00_AA_01_0b_00_FF"))
        #expect(id.address == "00:AA:01:0b:00:FF")
        #expect(id.token == "/org/bluez/hci0/dev_00_AA_01_0b_00_FF")
    }

    @Test(arguments: [
        "/org/bluez/hci0/dev_",  // no address
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE",  // five pairs
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF_00",  // seven pairs
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FG",  // not hex
        "/org/bluez/hci0/dev_AAA_BB_CC_DD_EE_F",  // pairs of the wrong size
        "/org/bluez/hci0/dev__AA_BB_CC_DD_EE_FF",  // an empty pair
        "/org/bluez/hci0",  // no device
        "dev_AA_BB_CC_DD_EE_FF",  // not an object path
    ])
    func anyOtherTokenNamesNoDevice(token: String) {
        #expect(BlueZClient.DeviceID(token: token) == nil)
    }
}
