#!/usr/bin/env python3
"""bumble_uart_echo_server — a Bumble Nordic UART Service peripheral that echoes what a central writes.

A peripheral nobody here wrote, for the central role of BlueZKit's UART bridge (`uart-bridge
central --mode gatt`, Tests/EndToEndTests/BumbleUARTEndToEndTests.swift): the Nordic UART Service
with RX (write, write without response) and TX (notify), on Bumble's GATT server. Every RX write
goes back, in the order written, as TX notifications of at most MTU - 3 bytes each (one per write
when the write fits), to the central that wrote it. Run with the Bumble venv's python3
(BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_uart_echo_server.py [--mtu N] [--name NAME] [--address A] [--transport T] [--timeout S]

--mtu is the most its GATT server accepts in the central's Exchange MTU (517 by default, Bumble's).
Advertises the service and NAME, connectable, once; runs until the central unsubscribes from TX or
the link ends (whichever comes first: a link that the guest's kernel ends as the central, on a
Device1.Disconnect, may never reach this controller, see Tests/EndToEndTests/BumbleUARTEndToEndTests.swift).
Lines on standard output (JSON):
  {"event":"advertising"}  {"event":"connected","peer":ADDRESS}  {"event":"subscribed","notify":BOOL}
  {"event":"received","value":HEX}  per RX write, as it came
  {"event":"subscribed","notify":false} or {"event":"disconnected","reason":CODE}
  {"event":"totals","received":BYTES,"echoed":BYTES}  {"event":"done"}
"""

import argparse
import asyncio

from bumble import att
from bumble.core import UUID
from bumble.gatt import Characteristic, CharacteristicValue, Service

import bumble_faulty_server as peripheral
import bumble_peer
from bumble_peer import emit

NUS_SERVICE = UUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
NUS_RX = UUID("6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
NUS_TX = UUID("6E400003-B5A3-F393-E0A9-E50E24DCCA9E")


def main():
    parser = argparse.ArgumentParser(description="A Nordic UART Service echo server on Bumble.")
    parser.add_argument("--mtu", type=int, default=517)
    parser.add_argument("--name", default="Bumble UART")
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:51")
    args = parser.parse_args()

    # Writes wait here in the order they came (Bumble hands each to a task of its own, started in
    # order; the callback below runs synchronously at its start) and one sender echoes them.
    pending = asyncio.Queue()
    totals = {"received": 0, "echoed": 0}

    def on_write(connection, value):
        value = bytes(value)
        emit("received", value=value.hex())
        totals["received"] += len(value)
        pending.put_nowait((connection, value))

    tx = Characteristic(NUS_TX, Characteristic.Properties.NOTIFY, 0, b"")
    rx = Characteristic(NUS_RX, Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
                        Characteristic.WRITEABLE, CharacteristicValue(write=on_write))
    link = {}

    def prepare(device):
        device.gatt_server.max_mtu = args.mtu
        device.add_service(Service(NUS_SERVICE, [rx, tx]))
        def on_subscription(_connection, characteristic, notify, _indicate):
            if characteristic is tx:
                emit("subscribed", notify=notify)
                if not notify:
                    link["ended"].set()

        device.on("characteristic_subscription", on_subscription)
        link["ended"], _ = peripheral.watch_link(device)

    async def echo(device):
        while True:
            connection, value = await pending.get()
            step = connection.att_mtu - 3
            for offset in range(0, len(value), step):
                await device.notify_subscriber(connection, tx, value[offset:offset + step])
            totals["echoed"] += len(value)

    async def run(device):
        sender = asyncio.create_task(echo(device))
        await peripheral.advertise(device, args.name, NUS_SERVICE)
        await link["ended"].wait()
        sender.cancel()
        emit("totals", **totals)

    bumble_peer.run(args, prepare, run)


if __name__ == "__main__":
    main()
