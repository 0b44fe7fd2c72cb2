#!/usr/bin/env python3
"""bumble_disconnector — a GATT server that ends the link with a reason of its choosing.

Misbehaves on purpose, for BlueZKit's central (Tests/EndToEndTests/FaultyPeerEndToEndTests.swift):
its one characteristic (5A1E0B02-…, write) accepts a write, answers it, and 0.2 s later the peer
ends the link with an HCI Disconnect carrying REASON (default 0x13, remote user terminated).
Bumble's controller passes any reason to the other side in its LL terminate indication, also
ones a real controller would refuse to send, such as 0x08 (connection timeout): the central's
controller reports the link ended with that reason, as if the supervision timer had run out
(Bumble's controller has no supervision timer of its own). The test uses 0x13 and 0x15 (remote
user, power off), 0x08 and 0x1A (unsupported remote feature, which the kernel reports as unknown).
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_disconnector.py [--reason CODE] [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"written","value":HEX}  {"event":"disconnecting","reason":CODE}  {"event":"done"}
"""

import argparse
import asyncio

from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_faulty_server as faulty
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A GATT server that disconnects with a chosen reason.")
    parser.add_argument("--reason", type=lambda text: int(text, 0), default=0x13)
    parser.add_argument("--name", default="BZK-DIS")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:03")
    args = parser.parse_args()
    tasks = set()
    link = {}  # the connections, watch_link's list

    async def disconnect_soon():
        await asyncio.sleep(0.2)  # the Write Response leaves first
        emit("disconnecting", reason=args.reason)
        await link["connections"][0].disconnect(reason=args.reason)

    def written(_connection, value):
        emit("written", value=bytes(value).hex())
        task = asyncio.get_running_loop().create_task(disconnect_soon())
        tasks.add(task)  # held until the run ends

    trigger = Characteristic(faulty.characteristic_uuid(0), Characteristic.Properties.WRITE,
                             Characteristic.WRITEABLE, CharacteristicValue(write=written))

    def prepare(_device, connections):
        link["connections"] = connections

    faulty.serve(args, [Service(faulty.SERVICE_UUID, [trigger])], prepare)


if __name__ == "__main__":
    main()
