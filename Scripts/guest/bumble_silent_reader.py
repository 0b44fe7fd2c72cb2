#!/usr/bin/env python3
"""bumble_silent_reader — a GATT server that never answers a read of one characteristic.

Misbehaves on purpose, for BlueZKit's central (Tests/EndToEndTests/FaultyPeerEndToEndTests.swift):
its service has two readable characteristics: 5A1E0B02-… answers 0x2A; a read of 5A1E0B03-… is
never answered (no Read Response, no Error Response), so the central's ATT transaction stays open
until its own ATT timeout (30 s, after which the central's host must drop the link). Runs until
the link ends. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_silent_reader.py [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"ignoring"}  when a read of the silent characteristic came
  {"event":"done"}
"""

import argparse
import asyncio

from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_faulty_server as faulty
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A GATT server that never answers one read.")
    parser.add_argument("--name", default="BZK-SIL")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:02")
    args = parser.parse_args()

    async def never(_connection):
        emit("ignoring")
        await asyncio.Event().wait()  # nothing sets it: no response ever leaves

    answered = Characteristic(faulty.characteristic_uuid(0), Characteristic.Properties.READ,
                              Characteristic.READABLE, bytes([0x2A]))
    silent = Characteristic(faulty.characteristic_uuid(1), Characteristic.Properties.READ,
                            Characteristic.READABLE, CharacteristicValue(read=never))
    faulty.serve(args, [Service(faulty.SERVICE_UUID, [answered, silent])])


if __name__ == "__main__":
    main()
