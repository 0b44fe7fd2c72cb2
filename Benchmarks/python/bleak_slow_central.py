"""A bleak central whose notification callback is slow and keeps nothing, for
Scripts/benchmark-flood's slow notification flood: the counterpart of `flood-peer central`
(Benchmarks/FloodPeer).

    python bleak_slow_central.py [--adapter hci0] [--name Flood] [--delegate-delay-ms 20]

Finds --name on --adapter (BleakScanner), connects, subscribes to TX
(6e400003-b5a3-f393-e0a9-e50e24dcca9e) with bleak's default, StartNotify (value changes as
PropertiesChanged signals, as flood-peer central by default); the callback counts the value,
sleeps D ms (time.sleep: bleak calls it synchronously on the event loop, as an app's slow code
would) and drops it. One JSON line per event on standard output: {"event": "subscribed"}, every
second {"event": "count", "notifications": N, "bytes": B, "seconds": S}, and the same as
{"event": "final", ...} on SIGTERM.
"""

import argparse
import asyncio
import json
import signal
import sys
import time

from bleak import BleakClient, BleakScanner

TX = "6e400003-b5a3-f393-e0a9-e50e24dcca9e"


def emit(event, fields=None):
    sys.stdout.write(json.dumps({"event": event, **(fields or {})}, sort_keys=True) + "\n")
    sys.stdout.flush()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--name", default="Flood")
    parser.add_argument("--delegate-delay-ms", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    delay = args.delegate_delay_ms / 1000
    started = time.monotonic()
    counts = {"notifications": 0, "bytes": 0}

    state = {"emitted": started}

    def snapshot():
        return {**counts, "seconds": round(time.monotonic() - started, 3)}

    def on_notification(_characteristic, data):
        counts["notifications"] += 1
        counts["bytes"] += len(data)
        time.sleep(delay)  # the slow app; the value is dropped
        # While values keep coming the event loop may not get to the timer below: say it here.
        if time.monotonic() - state["emitted"] >= 1:
            state["emitted"] = time.monotonic()
            emit("count", snapshot())

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stopping.set)
    bluez = {"adapter": args.adapter}
    # The emulated link sometimes drops during service discovery: three attempts, as the
    # BlueZKit side's driver allows its connect.
    for attempt in range(3):
        device = await BleakScanner.find_device_by_name(args.name, timeout=args.timeout, bluez=bluez)
        if device is None:
            sys.stderr.write(f"bleak_slow_central: {args.name} not found on {args.adapter}\n")
            sys.exit(1)
        client = BleakClient(device, timeout=60, bluez=bluez)
        try:
            await client.connect()
            await client.start_notify(TX, on_notification)
            break
        except Exception as error:  # noqa: BLE001 (bleak raises several kinds)
            sys.stderr.write(f"bleak_slow_central: attempt {attempt + 1}: {error!r}\n")
            if attempt == 2:
                raise
            await asyncio.sleep(1)
    emit("subscribed")
    while not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), 1)
        except asyncio.TimeoutError:
            state["emitted"] = time.monotonic()
            emit("count", snapshot())
    emit("final", snapshot())


if __name__ == "__main__":
    asyncio.run(main())
