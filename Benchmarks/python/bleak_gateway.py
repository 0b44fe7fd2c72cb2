"""The bleak side of the gateway benchmark (Scripts/guest/gateway-benchmark.py).

    python bleak_gateway.py [--adapter hci0] [--prefix NAME] [--links K] [--count N] [--warmup W]
                            [--extra E] [--timeout S] [--print-readings] [--acquire-notify]

Does what Benchmarks/GatewayBenchmark does, with bleak: scans (BleakScanner, the Heart Rate
service) until it has seen the peripherals named PREFIX1 … PREFIXK (default "BlueZKit GW ",
K = 6), connects to them one after the other in that order (the order the emulated
environment is prepared for; see GatewayBenchmark), subscribes to Heart Rate Measurement
(0x2A37, bleak's default StartNotify path, or with --acquire-notify AcquireNotify's socket:
bluez={"use_start_notify": False}) on each, decodes every notification as
bleak_central.py does and counts them per link and in all. Once all K are subscribed and W
more readings arrived it prints {"event": "window", "mark": "start", ...}, N readings later
{"event": "window", "mark": "end", ...} (the watcher samples /proc/PID/stat at those lines),
E readings later a summary (its own time.process_time() over the window as a cross-check),
then disconnects and exits 0. Exits 1 when a peripheral is not found, three attempts to
connect one fail, or a link drops during the measurement. --print-readings adds a line per
reading.

Set-up is not measured, and goes through bleak_central.py's work-arounds (BlueZ 5.66's
missing Connected=true signal; a failed first attempt retried).
"""

import argparse
import asyncio
import json
import os
import sys
import time

from bleak import BleakClient, BleakScanner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleak_central import MEASUREMENT, abandon, decode, tolerate_missing_connected_signal  # noqa: E402

SERVICE = "0000180d-0000-1000-8000-00805f9b34fb"


def emit(event, **fields):
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--prefix", default="BlueZKit GW ")
    parser.add_argument("--links", type=int, default=6)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--extra", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--print-readings", action="store_true")
    parser.add_argument("--acquire-notify", action="store_true")
    args = parser.parse_args()
    if args.links < 1 or args.count < 2 or args.warmup < 0 or args.extra < 0:
        parser.error("--links at least 1, --count at least 2, --warmup and --extra not negative")

    tolerate_missing_connected_signal()
    bluez = {"adapter": args.adapter}
    names = [f"{args.prefix}{index}" for index in range(1, args.links + 1)]
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    lost = loop.create_future()

    # Scan until every wanted name was seen.
    found = {}
    all_found = asyncio.Event()

    def detected(device, advertisement):
        name = advertisement.local_name or device.name
        if name in names and name not in found:
            found[name] = device
            emit("discovered", name=name, id=device.address)
            if len(found) == len(names):
                all_found.set()

    scanner = BleakScanner(detected, service_uuids=[SERVICE], bluez=bluez)
    await scanner.start()
    try:
        await asyncio.wait_for(all_found.wait(), args.timeout)
    except asyncio.TimeoutError:
        emit("error", message=f"found {sorted(found)} of {names} on {args.adapter}")
        return 1
    finally:
        await scanner.stop()

    state = {"readings": 0, "subscribed": 0, "finished": False, "checksum": 0}
    per_link = {name: 0 for name in names}
    marks = {}

    def on_notification(name):
        def handle(_characteristic, data):
            try:
                bpm, contact, energy, rr = decode(data)
            except ValueError as error:
                emit("error", message=f"unreadable measurement: {error}")
                return
            state["checksum"] += bpm + contact + (energy or 0) + sum(rr)
            per_link[name] += 1
            if args.print_readings:
                emit("heartRate", name=name, bpm=bpm)
            if state["subscribed"] < len(names) or state["finished"]:
                return
            state["readings"] += 1
            readings = state["readings"]
            if readings == args.warmup + 1:
                marks["start"] = (time.monotonic(), time.process_time(), dict(per_link))
                emit("window", mark="start", readings=readings)
            elif readings == args.warmup + args.count:
                marks["end"] = (time.monotonic(), time.process_time(), dict(per_link))
                emit("window", mark="end", readings=readings)
            if readings >= args.warmup + args.count + args.extra and not done.done():
                state["finished"] = True
                done.set_result(None)
        return handle

    def on_disconnect(client):
        # Only during the measurement: a failed set-up attempt is retried below.
        if state["subscribed"] == len(names) and not state["finished"] and not lost.done():
            lost.set_result(client.address)

    # Connect one after the other, in name order; subscribe each as it comes up.
    clients = []
    for index, name in enumerate(names, 1):
        client = None
        for attempt in range(1, 4):
            client = BleakClient(found[name], disconnected_callback=on_disconnect, timeout=60, bluez=bluez)
            try:
                await client.connect()
                emit("connected", name=name, links=index, attempt=attempt)
                if args.acquire_notify:
                    await client.start_notify(MEASUREMENT, on_notification(name), bluez={"use_start_notify": False})
                else:
                    await client.start_notify(MEASUREMENT, on_notification(name))
                break
            except Exception as error:  # noqa: BLE001 - reported, then retried
                emit("error", message=f"{name} attempt {attempt}: {type(error).__name__}: {error}")
                await abandon(client)
                client = None
        if client is None:
            return 1
        clients.append(client)
        state["subscribed"] = index
        emit("subscribed", name=name, links=index)

    await asyncio.wait([done, lost], return_when=asyncio.FIRST_COMPLETED)
    if not done.done():
        emit("error", message=f"{lost.result()} disconnected after {state['readings']} readings")
        return 1
    (t0, c0, p0), (t1, c1, p1) = marks["start"], marks["end"]
    notifications = args.count - 1
    emit("summary", links=len(names), count=args.count, per_link=[p1[name] - p0[name] for name in names],
         elapsed_s=t1 - t0, cpu_s=c1 - c0, cpu_ms_per_notification=(c1 - c0) * 1000 / notifications,
         notifications_per_s=notifications / (t1 - t0), checksum=state["checksum"])
    for client in clients:
        try:
            await client.disconnect()
        except Exception as error:  # noqa: BLE001 - after the measurement; the driver checks the links
            emit("warning", message=f"disconnecting: {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
