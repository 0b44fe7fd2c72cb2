#!/usr/bin/env python3
"""bumble_changing_advertiser — a Bumble advertiser with a TX Power Level, whose data changes on command.

An advertiser nobody here wrote, for BlueZKit's central role (Tests/EndToEndTests/
BumbleScanEndToEndTests.swift): it advertises one legacy, non-connectable advertisement (a Bumble
extended advertising set with legacy PDUs) every --interval milliseconds, carrying the flags
(LE general discoverable), a complete local name, manufacturer data of company 0xFFFF with one
counter byte, and a TX Power Level AD field (type 0x0A). Each SIGUSR1 makes the next change, in
turn: (1) the manufacturer counter goes up by one, (2) the name gets the suffix "-<change>",
(3) the TX power goes up by 10 dBm; then again from (1). Changes are made one after the other,
in the order the signals came. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the
guest).

  bumble_changing_advertiser.py [--name NAME] [--tx-power DBM] [--interval MS] [--duration S]
                                [--address A] [--transport T] [--timeout S]

Lines on standard output (JSON), one when advertising starts (change 0) and one after each change,
once Bumble's controller has the new data:
  {"event":"advertising","change":N,"name":NAME,"manufacturer":HEX,"txPower":DBM}
  {"event":"done"}   after --duration seconds.
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio
import signal

from bumble.core import AdvertisingData
from bumble.device import AdvertisingEventProperties, AdvertisingParameters

import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A Bumble advertiser whose data changes on SIGUSR1.")
    parser.add_argument("--name", default="BZK-CHG")
    parser.add_argument("--tx-power", type=int, default=-6, help="the TX Power Level field, in dBm")
    parser.add_argument("--interval", type=float, default=100, help="advertising interval, in ms")
    parser.add_argument("--duration", type=float, default=120)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0C:01", timeout=180)
    args = parser.parse_args()
    state = {"change": 0, "name": args.name, "counter": 0, "txPower": args.tx_power}

    def data():
        fields = AdvertisingData([
            (AdvertisingData.FLAGS, bytes([AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                           | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, state["name"].encode()),
            (AdvertisingData.MANUFACTURER_SPECIFIC_DATA, manufacturer()),
            (AdvertisingData.TX_POWER_LEVEL, state["txPower"].to_bytes(1, "little", signed=True)),
        ])
        return bytes(fields)

    def manufacturer():
        return bytes([0xFF, 0xFF, state["counter"]])

    def announce():
        emit("advertising", change=state["change"], name=state["name"], manufacturer=manufacturer().hex(),
             txPower=state["txPower"])

    def change():
        state["change"] += 1
        step = (state["change"] - 1) % 3
        if step == 0:
            state["counter"] = (state["counter"] + 1) % 256
        elif step == 1:
            state["name"] = f"{args.name}-{state['change']}"
        else:
            state["txPower"] += 10

    async def run(device):
        parameters = AdvertisingParameters(
            advertising_event_properties=AdvertisingEventProperties(
                is_connectable=False, is_scannable=False, is_legacy=True),
            primary_advertising_interval_min=args.interval, primary_advertising_interval_max=args.interval)
        advertising_set = await device.create_advertising_set(
            advertising_parameters=parameters, random_address=device.random_address, advertising_data=data())
        announce()
        requests = asyncio.Queue()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, requests.put_nowait, None)

        async def apply_changes():
            while True:
                await requests.get()
                change()
                await advertising_set.set_advertising_data(data())
                announce()

        changes = asyncio.create_task(apply_changes())
        await asyncio.sleep(args.duration)
        changes.cancel()

    bumble_peer.run(args, lambda _device: None, run)


if __name__ == "__main__":
    main()
