#!/usr/bin/env python3
"""bumble_gatt_subscriber — a Bumble GATT client that subscribes to one characteristic and prints what it gets.

A central nobody here wrote, for BlueZKit's peripheral role with several centrals at once
(Tests/EndToEndTests/BumbleEndToEndTests.swift): several of these, each on its own Bumble
controller (bumble-link.py gives every peer program one), are that many centrals on one link.
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_gatt_subscriber.py --service UUID --characteristic UUID [--count N] [--address A]
                            [--transport T] [--timeout S]

Scans for an advertisement listing the 128-bit service UUID, connects, discovers the service and
the characteristic with Bumble's Peer, subscribes (notifications), prints every value until N
came, unsubscribes and disconnects. Lines on standard output (JSON):
  {"event":"scanning"}  {"event":"connected"}  {"event":"subscribed"}
  {"event":"notify","value":HEX}  ×N
  {"event":"disconnected"}  {"event":"done"}
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID

import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="Subscribe to one characteristic with Bumble.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--characteristic", required=True)
    parser.add_argument("--count", type=int, default=2)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:10")
    args = parser.parse_args()
    args.name = "Bumble subscriber"
    characteristic_uuid = UUID(args.characteristic)

    async def run(device):
        connection, found = await bumble_peer.connect_to_service(device, UUID(args.service))
        characteristic = found.get(characteristic_uuid)
        if characteristic is None:
            raise RuntimeError(f"the service has no characteristic {characteristic_uuid}")
        values = asyncio.Queue()
        await characteristic.subscribe(values.put_nowait)
        emit("subscribed")
        for _ in range(args.count):
            emit("notify", value=bytes(await values.get()).hex())
        await characteristic.unsubscribe()
        await connection.disconnect()
        emit("disconnected")

    bumble_peer.run(args, lambda _device: None, run)


if __name__ == "__main__":
    main()
