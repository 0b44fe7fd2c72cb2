#!/usr/bin/env python3
"""bumble_service_changer — a Bumble peripheral that adds a GATT service while a central is connected.

A peripheral nobody here wrote, for BlueZKit's central role (Tests/EndToEndTests/
BumbleServiceChangeEndToEndTests.swift). It advertises --service (one readable characteristic,
value 01) and, once the connected central has read that characteristic, adds --added (one
readable characteristic, value 09) to its running GATT database and indicates Service Changed
(Bumble's Generic Attribute service) over the new service's handle range, to every central
subscribed to it. It exits once the central has read the added characteristic (or its link
went). Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_service_changer.py --service UUID --added UUID [--address A] [--transport T] [--timeout S]

Lines on standard output (JSON):
  {"event":"advertising"}  {"event":"connected"}  {"event":"read"}
  {"event":"serviceChangedSubscribed","indicate":BOOL}  (whenever the central writes that CCC)
  {"event":"changed","start":HANDLE,"end":HANDLE,"subscribed":BOOL}  (after the confirmation)
  {"event":"readAdded"}  {"event":"done"}
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio
import struct

from bumble.core import UUID
from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_faulty_server as peripheral
import bumble_peer
from bumble_peer import emit


def readable(uuid, value):
    return Characteristic(uuid, Characteristic.Properties.READ, Characteristic.Permissions.READABLE, value)


def main():
    parser = argparse.ArgumentParser(description="Add a GATT service while connected, with Bumble.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--added", required=True)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:60")
    args = parser.parse_args()
    args.name = "Bumble service changer"
    was_read = asyncio.Event()
    subscribed = asyncio.Event()
    added_read = asyncio.Event()
    disconnected = asyncio.Event()

    def on_read(_connection):
        emit("read")
        was_read.set()
        return b"\x01"

    def on_added_read(_connection):
        emit("readAdded")
        added_read.set()
        return b"\x09"

    def prepare(device):
        first = Service(UUID(args.service), [
            readable(UUID("5A1E0602-B1E2-4C00-9E00-000000000001"), CharacteristicValue(read=on_read))])
        device.add_service(first)

        def on_subscription(_bearer, _notify, indicate):
            emit("serviceChangedSubscribed", indicate=indicate)
            if indicate:
                subscribed.set()

        device.gatt_service.service_changed_characteristic.on("subscription", on_subscription)

        def on_connection(connection):
            emit("connected")
            connection.on("disconnection", lambda reason: (emit("disconnected", reason=reason), disconnected.set()))

        device.on("connection", on_connection)

    async def run(device):
        await peripheral.advertise(device, None, UUID(args.service))
        await was_read.wait()
        added = Service(UUID(args.added), [readable(UUID("5A1E0604-B1E2-4C00-9E00-000000000001"),
                                                 CharacteristicValue(read=on_added_read))])
        device.add_service(added)
        # Indicated to subscribers only: bluetoothd subscribes to Service Changed as it connects.
        await device.indicate_subscribers(
            device.gatt_service.service_changed_characteristic,
            struct.pack("<HH", added.handle, added.end_group_handle))
        emit("changed", start=added.handle, end=added.end_group_handle, subscribed=subscribed.is_set())
        # Not the disconnection alone: in a first run (5.82, 2026-12-06) this host never heard
        # of the link that the central ended (not looked into).
        done = [asyncio.ensure_future(event.wait()) for event in (added_read, disconnected)]
        await asyncio.wait(done, return_when=asyncio.FIRST_COMPLETED)
        for waiting in done:
            waiting.cancel()
        await asyncio.sleep(1)  # the read's response leaves before the host goes

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
