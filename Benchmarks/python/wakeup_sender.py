"""The Python sender of the send floor (Scripts/benchmark-wakeup-floor), shaped as bless's.

    python3 wakeup_sender.py INTERVAL_MS COUNT

On the system bus with dbus-next (what bless uses): a ServiceInterface
"org.bluez.GattCharacteristic1" exported at the benchmark's characteristic path whose Value
setter calls emit_properties_changed, as bless's characteristic does (a broadcast
PropertiesChanged signal); an asyncio loop sleeping to an absolute schedule every INTERVAL_MS,
as Benchmarks/python/bless_peripheral.py does, sets Value to a 2-byte measurement (flags
0x00, the rate 60 + i % 120) and writes one line {"bpm": N, "event": "notified"} to standard
output. COUNT signals, then it exits.
"""

import asyncio
import json
import sys

from dbus_next import BusType  # type: ignore
from dbus_next.aio import MessageBus  # type: ignore
from dbus_next.service import ServiceInterface, dbus_property  # type: ignore

# The D-Bus type of Value, as a name: dbus-next reads the annotation's string.
AY = "ay"
PATH = "/org/bluez/hci0/dev_00_11_22_33_44_55/service0010/char0011"


class Characteristic(ServiceInterface):
    def __init__(self):
        super().__init__("org.bluez.GattCharacteristic1")
        self._value = b""

    @dbus_property()
    def Value(self) -> AY:  # noqa: N802
        return self._value

    @Value.setter
    def Value(self, value: AY):  # noqa: N802
        self._value = value
        self.emit_properties_changed(changed_properties={"Value": self._value})


async def main():
    interval = int(sys.argv[1]) / 1000
    count = int(sys.argv[2])
    bus = await MessageBus(bus_type=BusType.SYSTEM).connect()
    characteristic = Characteristic()
    bus.export(PATH, characteristic)
    loop = asyncio.get_running_loop()
    next_time = loop.time()
    for i in range(count):
        next_time += interval
        await asyncio.sleep(max(0, next_time - loop.time()))
        bpm = 60 + i % 120
        characteristic.Value = bytes([0x00, bpm])
        sys.stdout.write(json.dumps({"event": "notified", "bpm": bpm}, sort_keys=True) + "\n")
        sys.stdout.flush()
    bus.disconnect()


if __name__ == "__main__":
    asyncio.run(main())
