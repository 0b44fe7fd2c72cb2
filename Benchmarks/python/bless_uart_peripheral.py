"""A Nordic UART peripheral with bless, for Scripts/benchmark-flood: the counterpart of
`uart-bridge peripheral` (Examples/UARTBridge).

The service 6e400001-b5a3-f393-e0a9-e50e24dcca9e with RX (6e400002-..., write and write without
response) and TX (6e400003-..., notify), published on --adapter and advertised with --name. Every
RX write goes back as a TX notification, as the example does: when no central is subscribed to
TX the bytes wait in a queue (the example's EchoQueue) and go out, in chunks of at most --chunk
bytes (default 244, the example's maximum value length), once one is. One JSON line per event
on standard output:

    {"event": "advertising", "name": NAME}
    {"event": "receiving"}              (the first RX write)
    {"event": "received", "bytes": N}   (each second in which more came: the bytes so far)

bless (on dbus-next) answers every WriteValue call once its write callback returned.
"""

import argparse
import asyncio
import json
import sys

from bless import (  # type: ignore
    BlessServer,
    GATTAttributePermissions,
    GATTCharacteristicProperties,
)

SERVICE = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"
TX = "6e400003-b5a3-f393-e0a9-e50e24dcca9e"


def emit(fields):
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--name", default="BlueZKit UART")
    parser.add_argument("--chunk", type=int, default=244)
    args = parser.parse_args()

    server = BlessServer(name=args.name, loop=asyncio.get_running_loop(), adapter=args.adapter)
    pending = bytearray()
    state = {"received": 0}

    def flush():
        subscribed = [str(uuid).lower() for uuid in server.app.subscribed_characteristics]
        if TX not in subscribed:
            return
        tx = server.get_characteristic(TX)
        while pending:
            tx.value = bytearray(pending[:args.chunk])
            del pending[:args.chunk]
            server.update_value(SERVICE, TX)

    def on_write(characteristic, value, **_):
        if str(characteristic.uuid).lower() != RX or not value:
            return
        if state["received"] == 0:
            emit({"event": "receiving"})
        state["received"] += len(value)
        pending.extend(value)
        flush()

    server.write_request_func = on_write
    server.read_request_func = lambda characteristic, **_: characteristic.value
    await server.add_new_service(SERVICE)
    await server.add_new_characteristic(
        SERVICE, RX, GATTCharacteristicProperties.write | GATTCharacteristicProperties.write_without_response,
        None, GATTAttributePermissions.writeable)
    await server.add_new_characteristic(
        SERVICE, TX, GATTCharacteristicProperties.notify, None, GATTAttributePermissions.readable)
    await server.start()
    emit({"event": "advertising", "name": args.name})
    reported = 0
    while True:
        await asyncio.sleep(1)
        flush()  # a subscription that came after the last write
        if state["received"] != reported:
            reported = state["received"]
            emit({"event": "received", "bytes": reported})


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
