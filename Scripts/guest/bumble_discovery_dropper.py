#!/usr/bin/env python3
"""bumble_discovery_dropper — a GATT server that ends the link in the middle of service discovery.

Misbehaves on purpose, for BlueZKit's central (Tests/EndToEndTests/FaultyPeerEndToEndTests.swift):
it has a large database (SERVICES primary services of 5 characteristics each, the first one the
test's 5A1E0B01-…) and answers the central's primary service discovery (Read By Group Type), but
on the central's first Read By Type request after it (included services or characteristics: the
next step of discovery) it sends no response and ends the link (remote user terminated). Read By
Type requests before any Read By Group Type (bluetoothd reads Server Supported Features first)
are answered. Runs until the link
ends. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_discovery_dropper.py [--services N] [--name NAME] [--transport T] [--timeout S]

Lines on standard output (JSON), besides those of bumble_faulty_server:
  {"event":"servicesListed","start":HANDLE}  for each Read By Group Type request answered
  {"event":"dropping","type":UUID}           on the first Read By Type request
  {"event":"done"}
"""

import argparse
import asyncio

from bumble.core import UUID
from bumble.gatt import Characteristic, Service

import bumble_faulty_server as faulty
import bumble_peer
from bumble_peer import emit


def main():
    parser = argparse.ArgumentParser(description="A GATT server that drops the link during discovery.")
    parser.add_argument("--services", type=int, default=8)
    parser.add_argument("--name", default="BZK-DRP")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:0B:04")
    args = parser.parse_args()
    link = {"dropping": False, "listed": False}
    tasks = set()

    def service(index):
        uuid = faulty.SERVICE_UUID if index == 0 else UUID(f"5A1E0C{index:02X}-B1E2-4C00-9E00-000000000001")
        characteristics = [Characteristic(UUID(f"5A1E0D{index:02X}-B1E2-4C00-9E00-0000000000{number:02X}"),
                                          Characteristic.Properties.READ, Characteristic.READABLE,
                                          bytes([index, number]))
                           for number in range(5)]
        return Service(uuid, characteristics)

    def prepare(device, connections):
        server = device.gatt_server
        list_services = server.on_att_read_by_group_type_request
        read_types = server.on_att_read_by_type_request

        # Bumble's GATT server looks its handlers up on the instance: these two stand in for it.
        def read_by_group_type(bearer, request):
            emit("servicesListed", start=request.starting_handle)
            link["listed"] = True
            list_services(bearer, request)

        def read_by_type(bearer, request):
            if not link["listed"]:
                # Before primary service discovery (bluetoothd reads Server Supported Features).
                return read_types(bearer, request)
            if link["dropping"]:
                return None
            link["dropping"] = True
            emit("dropping", type=str(request.attribute_type))
            task = asyncio.get_running_loop().create_task(connections[0].disconnect())
            tasks.add(task)
            return None

        server.on_att_read_by_group_type_request = read_by_group_type
        server.on_att_read_by_type_request = read_by_type

    faulty.serve(args, [service(index) for index in range(args.services)], prepare)


if __name__ == "__main__":
    main()
