#!/usr/bin/env python3
"""bumble_mtu_server — a Bumble peripheral whose GATT server holds the ATT MTU to --mtu.

A peripheral nobody here wrote, for BlueZKit's central role (Tests/EndToEndTests/
BumbleLongAttributeEndToEndTests.swift): its GATT server answers the central's Exchange MTU
with --mtu (23: the link stays at the default; 517 by default, Bumble's own maximum), and it
reports every value written to its one characteristic (write and write without response),
with the ATT MTU of the link, as Bumble received it. Run with the Bumble venv's python3
(BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_mtu_server.py --service UUID --characteristic UUID [--mtu N]
                       [--address A] [--transport T] [--timeout S]

Lines on standard output (JSON), until it is stopped (SIGTERM) or --timeout passes:
  {"event":"advertising"}  {"event":"connected"}
  {"event":"written","length":N,"value":HEX,"mtu":N}   for every write
  {"event":"disconnected","reason":N}
It does not end with the link: a link that the central (bluetoothd) ends has not reached the
Bumble host across the LocalLink in these runs (5.82, 2026-12-06; not looked into).
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID
from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_faulty_server as peripheral
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A GATT server that holds the ATT MTU, with Bumble.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--characteristic", required=True)
    parser.add_argument("--mtu", type=int, default=517)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:70")
    args = parser.parse_args()
    args.name = "Bumble MTU server"

    def on_write(connection, value):
        emit("written", length=len(value), value=bytes(value).hex(), mtu=connection.att_mtu)

    def prepare(device):
        device.gatt_server.max_mtu = args.mtu
        device.add_service(Service(UUID(args.service), [Characteristic(
            UUID(args.characteristic),
            Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.Permissions.WRITEABLE,
            CharacteristicValue(write=on_write))]))

        def on_connection(connection):
            emit("connected")
            connection.on("disconnection", lambda reason: emit("disconnected", reason=reason))

        device.on("connection", on_connection)

    async def run(device):
        await peripheral.advertise(device, None, UUID(args.service))
        await asyncio.Event().wait()  # until stopped

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
