#!/usr/bin/env python3
"""bumble_uart_client — a Bumble Nordic UART Service central: subscribes to TX, writes RX, prints the echo.

A central nobody here wrote, for the peripheral role of BlueZKit's UART bridge (`uart-bridge
peripheral`, Tests/EndToEndTests/BumbleUARTEndToEndTests.swift), which echoes every RX write as
TX notifications. Run with the Bumble venv's python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_uart_client.py --write KIND:HEX [--write KIND:HEX ...] [--mtu N] [--address A]
                        [--transport T] [--timeout S]

Scans for an advertisement listing the Nordic UART Service, connects, discovers RX and TX with
Bumble's Peer and subscribes to TX. With --mtu 23 (the default) the ATT MTU stays 23 (it never asks
for more and its GATT server answers the peripheral's Exchange MTU with 23); a larger --mtu is
exchanged. Then, one message at a time, in the order given: writes HEX to RX as KIND, and waits
until as many bytes came back through TX notifications as it wrote. KIND is
  command  a Write Command (write without response; must fit in one PDU: MTU - 3 bytes)
  request  a Write Request (MTU - 3 bytes at most)
  long     a long write: Prepare Write Requests of MTU - 5 bytes, then Execute Write (Bumble's GATT
           client has no long write, so the PDUs are its ATT classes, sent raw)
Then unsubscribes and disconnects. Lines on standard output (JSON):
  {"event":"scanning"}  {"event":"connected"}  {"event":"mtu","mtu":N}  {"event":"subscribed"}
  {"event":"echo","kind":KIND,"sent":HEX,"received":HEX,"notifications":N,"parts":N or null}  per message
  {"event":"disconnected"}  {"event":"done"}
A refused write, or an echo that does not come within --timeout, prints {"event":"error",...} and exits 1.
"""

import argparse
import asyncio

from bumble import att
from bumble.core import UUID

import bumble_peer
from bumble_long_attribute_client import long_write
from bumble_peer import emit

NUS_SERVICE = UUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
NUS_RX = UUID("6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
NUS_TX = UUID("6E400003-B5A3-F393-E0A9-E50E24DCCA9E")
KINDS = ("command", "request", "long")


def message(text):
    """KIND:HEX from the command line: (KIND, bytes)."""
    kind, _, hex_value = text.partition(":")
    if kind not in KINDS or not hex_value:
        raise argparse.ArgumentTypeError(f"{text}: KIND:HEX with KIND one of {', '.join(KINDS)}")
    return kind, bytes.fromhex(hex_value)


def main():
    parser = argparse.ArgumentParser(description="A Nordic UART Service central on Bumble.")
    parser.add_argument("--write", type=message, action="append", required=True, metavar="KIND:HEX")
    parser.add_argument("--mtu", type=int, default=att.ATT_DEFAULT_MTU)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:50")
    args = parser.parse_args()
    args.name = "Bumble UART client"

    async def run(device):
        connection, found = await bumble_peer.connect_to_service(device, NUS_SERVICE, args.mtu)
        rx, tx = found.get(NUS_RX), found.get(NUS_TX)
        if rx is None or tx is None:
            raise RuntimeError(f"RX or TX missing: found {list(found)}")
        client = connection.gatt_client
        emit("mtu", mtu=client.mtu)

        notifications = asyncio.Queue()
        await tx.subscribe(lambda value: notifications.put_nowait(bytes(value)))
        emit("subscribed")
        leftover = b""
        for kind, value in args.write:
            parts = None
            if kind == "long":
                parts, error = await long_write(client, rx.handle, value)
                if error is not None:
                    raise RuntimeError(f"the long write was refused with ATT error 0x{error:02x}")
            else:
                await rx.write_value(value, with_response=kind == "request")
            # The echo, however the peripheral cut it into notifications.
            received, count = leftover, 0
            while len(received) < len(value):
                received += await notifications.get()
                count += 1
            received, leftover = received[:len(value)], received[len(value):]
            emit("echo", kind=kind, sent=value.hex(), received=received.hex(), notifications=count, parts=parts)
        if leftover:
            raise RuntimeError(f"more came back than was written: {leftover.hex()}")
        await tx.unsubscribe()
        await connection.disconnect()
        emit("disconnected")

    bumble_peer.run(args, lambda device: bumble_peer.hold_default_mtu(device, args.mtu), run)


if __name__ == "__main__":
    main()
