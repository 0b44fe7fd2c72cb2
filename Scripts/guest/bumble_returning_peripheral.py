#!/usr/bin/env python3
"""bumble_returning_peripheral — a Bumble peripheral that advertises again whenever its link ends.

A well-behaved peripheral nobody here wrote, for BlueZKit's central when the central's own adapter
goes away and comes back (Tests/EndToEndTests/BumbleAdapterRemovalEndToEndTests.swift): one
readable characteristic (5A1E0B02-…, value 0x01) in the test service (5A1E0B01-…), advertised
connectable; after each disconnection it advertises again, until --connections links have come and
gone. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_returning_peripheral.py [--connections N] [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON):
  {"event":"advertising"}  {"event":"connected","peer":ADDRESS}  {"event":"disconnected","reason":CODE}
  (again for each link)  {"event":"done"}
"""

import argparse
import asyncio

from bumble.gatt import Characteristic, Service

import bumble_faulty_server as faulty
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A peripheral that advertises again after each link.")
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--name", default="BZK-BACK")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:03")
    args = parser.parse_args()
    ended = asyncio.Queue()

    def on_connection(connection):
        emit("connected", peer=str(connection.peer_address))
        connection.on("disconnection", lambda reason: (emit("disconnected", reason=reason), ended.put_nowait(reason)))

    def prepare(device):
        characteristic = Characteristic(faulty.characteristic_uuid(0), Characteristic.Properties.READ,
                                        Characteristic.READABLE, bytes([1]))
        device.add_service(Service(faulty.SERVICE_UUID, [characteristic]))
        device.on("connection", on_connection)

    async def run(device):
        for index in range(args.connections):
            await faulty.advertise(device, args.name)
            await ended.get()

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
