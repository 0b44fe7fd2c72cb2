#!/usr/bin/env python3
"""bumble_advertisement_scanner — a Bumble scanner that reports how an advertiser's advertisements arrived.

A scanner nobody here wrote, for BlueZKit's peripheral role (Tests/EndToEndTests/
BumbleAdvertisingOptionsEndToEndTests.swift): it scans (no duplicate filtering) until an
advertiser lists --service, then records that advertiser's advertising reports for --duration
seconds and prints what it saw. Scan responses are left out (Bumble's link answers each
advertisement with one carrying the same data). Run with the Bumble venv's python3
(BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_advertisement_scanner.py --service UUID [--duration S] [--address A] [--transport T] [--timeout S]

Lines on standard output (JSON):
  {"event":"scanning"}
  {"event":"found","address":A}   the first report that lists --service
  {"event":"report","count":N,"gaps_ms":[...],"median_gap_ms":M,"lengths":[...],
   "tx_power_field":P|null,"manufacturer":HEX|null}
     gaps_ms: the time between consecutive reports (Bumble's clock, milliseconds);
     lengths: the distinct lengths of the advertising data; tx_power_field: the TX Power Level
     AD field (0x0A) of the last report, if any; manufacturer: the last manufacturer data field.
  {"event":"done"}
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio
import statistics

from bumble.core import UUID, AdvertisingData

import bumble_peer
from bumble_peer import emit, SERVICE_UUID_LISTS


def main():
    parser = argparse.ArgumentParser(description="Report how an advertiser's advertisements arrive at a Bumble scanner.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--name", default="Bumble advertisement scanner")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:61")
    args = parser.parse_args()
    service = UUID(args.service)

    async def run(device):
        loop = asyncio.get_running_loop()
        found = loop.create_future()
        times, lengths, last = [], set(), {}

        def on_advertisement(advertisement):
            if advertisement.is_scan_response:
                return
            if not found.done():
                listed = [uuid for kind in SERVICE_UUID_LISTS for uuid in advertisement.data.get(kind) or []]
                if service not in listed:
                    return
                found.set_result(advertisement.address)
                emit("found", address=str(advertisement.address))
            elif advertisement.address != found.result():
                return
            times.append(loop.time())
            lengths.add(len(advertisement.data_bytes))
            last["tx"] = advertisement.data.get(AdvertisingData.TX_POWER_LEVEL)
            last["manufacturer"] = advertisement.data.get(AdvertisingData.MANUFACTURER_SPECIFIC_DATA, raw=True)

        device.on("advertisement", on_advertisement)
        await device.start_scanning(filter_duplicates=False)
        emit("scanning")
        await found
        await asyncio.sleep(args.duration)
        await device.stop_scanning()
        gaps = [round((later - earlier) * 1000, 1) for earlier, later in zip(times, times[1:])]
        manufacturer = last.get("manufacturer")
        emit("report", count=len(times), gaps_ms=gaps, median_gap_ms=statistics.median(gaps) if gaps else None,
             lengths=sorted(lengths), tx_power_field=last.get("tx"),
             manufacturer=manufacturer.hex() if manufacturer else None)

    bumble_peer.run(args, lambda _device: None, run)


if __name__ == "__main__":
    main()
