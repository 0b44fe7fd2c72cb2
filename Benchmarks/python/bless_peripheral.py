"""A Heart Rate sensor with bless (the Python GATT server users would pick), for Scripts/benchmark.

The counterpart of heart-rate-peripheral in the end-to-end benchmark: the same service
(0x180D) with the measurement (0x2A37, notify) and the same work per measurement — a slow
wave with a little noise, flags, the rate, an RR interval, energy expended every tenth one —
published on --adapter with --name, updated every --interval-ms while a central is
subscribed, one JSON line per notification on standard output:

    {"event": "advertising", "name": NAME}
    {"event": "subscribed"}
    {"bpm": 78, "event": "notified"}

bless (on dbus-next) gives no per-central subscription callback on BlueZ; "subscribed" is
printed once bluetoothd called the characteristic's StartNotify (bless keeps those in
`app.subscribed_characteristics`).
"""

import argparse
import asyncio
import json
import math
import random
import sys

from bless import (  # type: ignore
    BlessServer,
    GATTAttributePermissions,
    GATTCharacteristicProperties,
)

SERVICE = "0000180d-0000-1000-8000-00805f9b34fb"
MEASUREMENT = "00002a37-0000-1000-8000-00805f9b34fb"


def emit(fields):
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def measurement(count, energy_joules):
    """The next reading's value, as heart-rate-peripheral's model makes it."""
    wave = 12 * math.sin(count / 20)
    bpm = int(round(max(45, min(190, 78 + wave + random.uniform(-2, 2)))))
    rr = int(round(60.0 / bpm * 1024))
    flags = 0x06 | 0x10  # sensor contact detected, RR intervals
    value = bytearray([flags, bpm])
    if count % 10 == 0:
        flags |= 0x08
        value[0] = flags
        value += int(min(energy_joules / 1000, 0xFFFF)).to_bytes(2, "little")
    value += rr.to_bytes(2, "little")
    return bpm, value


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--name", default="BlueZKit Bench")
    parser.add_argument("--interval-ms", type=int, default=20)
    args = parser.parse_args()

    server = BlessServer(name=args.name, loop=asyncio.get_running_loop(), adapter=args.adapter)
    await server.add_new_service(SERVICE)
    await server.add_new_characteristic(
        SERVICE, MEASUREMENT, GATTCharacteristicProperties.notify, None, GATTAttributePermissions.readable)
    await server.start()
    emit({"event": "advertising", "name": args.name})

    characteristic = server.get_characteristic(MEASUREMENT)
    interval = args.interval_ms / 1000
    count, energy, subscribed = 0, 0.0, False
    next_time = asyncio.get_running_loop().time()
    while True:
        next_time += interval
        await asyncio.sleep(max(0, next_time - asyncio.get_running_loop().time()))
        count += 1
        bpm, value = measurement(count, energy)
        energy += interval * bpm * 1.4
        subscribed_uuids = [str(uuid).lower() for uuid in server.app.subscribed_characteristics]
        if MEASUREMENT not in subscribed_uuids:
            continue
        if not subscribed:
            subscribed = True
            emit({"event": "subscribed"})
        characteristic.value = value
        server.update_value(SERVICE, MEASUREMENT)
        emit({"event": "notified", "bpm": bpm})


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
