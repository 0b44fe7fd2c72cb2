"""A peripheral with bless whose write handler is slow and keeps nothing, for
Scripts/benchmark-flood's slow write flood: the counterpart of `flood-peer peripheral`
(Benchmarks/FloodPeer).

    python bless_slow_peripheral.py [--adapter hci1] [--name Flood] [--delegate-delay-ms 20]

The service 6e400001-b5a3-f393-e0a9-e50e24dcca9e with RX (6e400002-..., write and write without
response), published on --adapter and advertised with --name. The write handler counts the
write, sleeps D ms (time.sleep: bless calls it synchronously, from its D-Bus method handler on
the event loop, as an app's slow code would) and drops the value. One JSON line per event on
standard output: {"event": "advertising"}, every second {"event": "count", "writes": N,
"bytes": B, "seconds": S}, and the same as {"event": "final", ...} on SIGTERM.
"""

import argparse
import asyncio
import json
import signal
import sys
import time

from bless import (  # type: ignore
    BlessServer,
    GATTAttributePermissions,
    GATTCharacteristicProperties,
)

SERVICE = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"


def emit(event, fields=None):
    sys.stdout.write(json.dumps({"event": event, **(fields or {})}, sort_keys=True) + "\n")
    sys.stdout.flush()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--name", default="Flood")
    parser.add_argument("--delegate-delay-ms", type=int, default=20)
    args = parser.parse_args()
    delay = args.delegate_delay_ms / 1000
    started = time.monotonic()
    counts = {"writes": 0, "bytes": 0}

    state = {"emitted": started}

    def snapshot():
        return {**counts, "seconds": round(time.monotonic() - started, 3)}

    def on_write(characteristic, value, **_):
        counts["writes"] += 1
        counts["bytes"] += len(value or b"")
        time.sleep(delay)  # the slow app; the value is dropped
        # While values keep coming the event loop may not get to the timer below: say it here.
        if time.monotonic() - state["emitted"] >= 1:
            state["emitted"] = time.monotonic()
            emit("count", snapshot())

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stopping.set)
    server = BlessServer(name=args.name, loop=loop, adapter=args.adapter)
    server.write_request_func = on_write
    server.read_request_func = lambda characteristic, **_: characteristic.value
    await server.add_new_service(SERVICE)
    await server.add_new_characteristic(
        SERVICE, RX, GATTCharacteristicProperties.write | GATTCharacteristicProperties.write_without_response,
        None, GATTAttributePermissions.writeable)
    await server.start()
    emit("advertising", {"name": args.name})
    while not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), 1)
        except asyncio.TimeoutError:
            state["emitted"] = time.monotonic()
            emit("count", snapshot())
    emit("final", snapshot())


if __name__ == "__main__":
    asyncio.run(main())
