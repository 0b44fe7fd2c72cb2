#!/usr/bin/env python3
"""bumble_large_database — a Bumble peripheral with a large GATT database that it serves slowly.

A peripheral nobody here wrote, for BlueZKit's central role
(Tests/EndToEndTests/ServicesResolvedRaceEndToEndTests.swift). bluetoothd exports a resolved
database in one turn of its main loop, and sends `ServicesResolved` true before or after the
objects' `InterfacesAdded` (BlueZ issue 1489, bleak issue 1806): with hundreds of objects, a
client that trusts the signals it has received when `ServicesResolved` arrives sees part of the
database. This peer makes that window wide:
  - --services primary services (default 30), 5A1E0D00+i-…, each with --characteristics
    characteristics (default 4), 5A1E0E00+i*16+j-…, readable, the value bytes [i, j];
    characteristic 0 of each service also notifies (a CCC descriptor) and has a User Description;
  - its answers to Read By Type (how bluetoothd finds characteristics and included services)
    leave --delay-ms later (default 20), so discovery takes seconds;
  - a write of any value to the control characteristic 5A1E0DFF-… makes it end the link (reason
    0x13) half a second after its Write Response, and advertise again, so the central can come
    back to a database bluetoothd cached;
  - a write to 5A1E0DFE-… ends the link the same way at once, instead of answering.
Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_large_database.py [--services N] [--characteristics N] [--delay-ms MS]
                           [--address A] [--transport T] [--timeout S]

Lines on standard output (JSON), until it is stopped (SIGTERM) or --timeout passes:
  {"event":"advertising"}  {"event":"database","services":N,"characteristics":N}
  {"event":"connected","peer":ADDRESS}  {"event":"disconnected","reason":CODE}
  {"event":"read-by-type","count":N}    after every 10th delayed Read By Type answer
  {"event":"ending-link"}               when the control characteristic is written
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble.core import UUID, AdvertisingData
from bumble.gatt import Characteristic, CharacteristicValue, Descriptor, Service
from bumble.hci import HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR

import bumble_faulty_server
import bumble_peer
from bumble_peer import emit

CONTROL_UUID = UUID("5A1E0DFF-B1E2-4C00-9E00-000000000001")
ABRUPT_CONTROL_UUID = UUID("5A1E0DFE-B1E2-4C00-9E00-000000000001")


def service_uuid(index):
    return UUID(f"5A1E{0x0D00 + index:04X}-B1E2-4C00-9E00-000000000001")


def characteristic_uuid(service, index):
    return UUID(f"5A1E{0x0E00 + service * 16 + index:04X}-B1E2-4C00-9E00-000000000001")


def main():
    parser = argparse.ArgumentParser(description="A large GATT database served slowly, with Bumble.")
    parser.add_argument("--services", type=int, default=30)
    parser.add_argument("--characteristics", type=int, default=4)
    parser.add_argument("--delay-ms", type=int, default=20)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:D0")
    args = parser.parse_args()
    args.name = "Bumble large database"
    if not 1 <= args.services <= 0xFE or not 1 <= args.characteristics <= 16:
        parser.error("--services must be 1…254 and --characteristics 1…16")

    def prepare(device):
        services = []
        for i in range(args.services):
            characteristics = []
            for j in range(args.characteristics):
                properties = Characteristic.Properties.READ
                descriptors = []
                if j == 0:
                    properties |= Characteristic.Properties.NOTIFY
                    descriptors = [Descriptor(UUID.from_16_bits(0x2901), Descriptor.READABLE,
                                              f"service {i}".encode())]
                characteristics.append(Characteristic(
                    characteristic_uuid(i, j), properties, Characteristic.Permissions.READABLE,
                    bytes([i, j]), descriptors))
            services.append(Service(service_uuid(i), characteristics))

        def on_control_write(connection, value):
            # A moment later: the Write Response leaves first, and the central's write succeeds.
            def end_link():
                emit("ending-link")
                asyncio.get_running_loop().create_task(
                    connection.disconnect(HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR))

            asyncio.get_running_loop().call_later(0.5, end_link)

        async def on_abrupt_control_write(connection, value):
            emit("ending-link", answered=False)
            await connection.disconnect(HCI_REMOTE_USER_TERMINATED_CONNECTION_ERROR)
            await asyncio.Event().wait()  # never answers: the link is gone

        services.append(Service(service_uuid(0xFF), [
            Characteristic(CONTROL_UUID, Characteristic.Properties.WRITE, Characteristic.Permissions.WRITEABLE,
                           CharacteristicValue(write=on_control_write)),
            Characteristic(ABRUPT_CONTROL_UUID, Characteristic.Properties.WRITE,
                           Characteristic.Permissions.WRITEABLE, CharacteristicValue(write=on_abrupt_control_write)),
        ]))
        device.add_services(services)
        delay_answers_to_read_by_type(device.gatt_server, args.delay_ms / 1000)
        bumble_faulty_server.watch_link(device)
        advertise_again_after_each_link(device)

    def advertise_again_after_each_link(device):
        """advertise() starts once; come back after every link that ends."""
        def on_connection(connection):
            connection.on("disconnection", lambda _reason: asyncio.get_running_loop().create_task(
                device.start_advertising(auto_restart=False)))

        device.on("connection", on_connection)

    async def run(device):
        await bumble_faulty_server.advertise(device, "Bumble large database", service_uuid(0))
        emit("database", services=args.services, characteristics=args.characteristics)
        await asyncio.Event().wait()  # until stopped

    bumble_peer.run(args, prepare, run)


def delay_answers_to_read_by_type(server, delay):
    """Bumble's server finds the handler of a request by its name on the server object: this one
    answers Read By Type as Bumble would, `delay` seconds later."""
    answer = server.on_att_read_by_type_request
    answered = [0]

    def later(bearer, request):
        def respond():
            answer(bearer, request)
            answered[0] += 1
            if answered[0] % 10 == 0:
                emit("read-by-type", count=answered[0])

        asyncio.get_running_loop().call_later(delay, respond)

    server.on_att_read_by_type_request = later


if __name__ == "__main__":
    main()
