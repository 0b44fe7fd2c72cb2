#!/usr/bin/env python3
"""bumble_extended_advertiser — a Bumble peripheral whose advertising data does not fit a legacy advertisement.

An advertiser nobody here wrote, for BlueZKit's central role (Tests/EndToEndTests/
BumbleExtendedAdvertisingEndToEndTests.swift): it advertises with one extended advertising set
(not legacy, not connectable, not scannable) whose data is far longer than the 31 bytes of a
legacy advertisement: the flags, one 128-bit service UUID, manufacturer data of company 0xFFFF
with --payload bytes (0, 1, 2, ... mod 256), and a complete local name. Run with the Bumble
venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_extended_advertiser.py --service UUID [--payload N] [--name NAME] [--duration S]
                                [--address A] [--transport T] [--timeout S]

The data stays within the 229 bytes that one HCI LE Extended Advertising Report carries
(Bumble's controller reports a set's data in one report). Lines on standard output (JSON):
  {"event":"advertising","length":N,"manufacturer":HEX}   (N: the whole advertising data)
  {"event":"done"}   after --duration seconds.
A failure (the controller refusing extended advertising included) prints
{"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID, AdvertisingData
from bumble.device import AdvertisingEventProperties, AdvertisingParameters

import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="Extended advertising of more than 31 bytes with Bumble.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--payload", type=int, default=140, help="manufacturer data bytes after the company")
    parser.add_argument("--name", default="Bumble extended advertiser")
    parser.add_argument("--duration", type=float, default=60)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:50")
    args = parser.parse_args()
    manufacturer = bytes([0xFF, 0xFF]) + bytes(index % 256 for index in range(args.payload))
    data = bytes(AdvertisingData([
        (AdvertisingData.FLAGS, bytes([AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                       | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG])),
        (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, bytes(UUID(args.service))),
        (AdvertisingData.MANUFACTURER_SPECIFIC_DATA, manufacturer),
        (AdvertisingData.COMPLETE_LOCAL_NAME, args.name.encode()),
    ]))
    if len(data) > 229:
        parser.error(f"{len(data)} bytes of advertising data do not fit one report (229)")

    async def run(device):
        parameters = AdvertisingParameters(
            advertising_event_properties=AdvertisingEventProperties(
                is_connectable=False, is_scannable=False, is_legacy=False))
        await device.create_advertising_set(
            advertising_parameters=parameters, random_address=device.random_address, advertising_data=data)
        emit("advertising", length=len(data), manufacturer=manufacturer.hex())
        await asyncio.sleep(args.duration)

    bumble_peer.run(args, lambda _device: None, run)


if __name__ == "__main__":
    main()
