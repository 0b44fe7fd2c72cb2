#!/usr/bin/env python3
"""bumble_long_attribute_client — a Bumble central that reads and writes values longer than one ATT PDU.

A central nobody here wrote, for BlueZKit's peripheral role (Tests/EndToEndTests/
BumbleLongAttributeEndToEndTests.swift): it asks of a peripheral what the ATT MTU does not
fit in one PDU, and reports what it got, as Bumble decoded it. Run with the Bumble venv's
python3 (BLUEZKIT_BUMBLE_PYTHON in the guest).

  bumble_long_attribute_client.py --service UUID --long UUID --write UUID --notify UUID
      [--mtu N] [--write-length N] [--notify-count N] [--address A] [--transport T] [--timeout S]

What it does on purpose, in this order:
  - the ATT MTU: with --mtu 23 (the default) it never asks for more, and its GATT server
    answers the peripheral's own Exchange MTU with 23, so the link stays at 23; with a larger
    --mtu it sends Exchange MTU itself;
  - reads --long with Bumble's long read: a Read Request, then Read Blob Requests at the
    offsets that follow while the answers fill the PDU (MTU - 1 bytes);
  - sends one Read Blob Request of its own beyond the end of that value (its length + 1),
    which a peripheral must refuse with Invalid Offset (0x07);
  - writes --write-length bytes (0, 1, 2, ... mod 256) to --write as a long write: Prepare
    Write Requests of MTU - 5 bytes each, at increasing offsets, then Execute Write (flags 1);
    Bumble's GATT client has no long write, so the PDUs are its ATT classes, sent raw;
  - subscribes to --notify and reports --notify-count notifications with their lengths.
Then unsubscribes and disconnects. Lines on standard output (JSON):
  {"event":"scanning"}  {"event":"connected"}  {"event":"mtu","mtu":N}
  {"event":"read","length":N,"value":HEX}
  {"event":"readBeyondEnd","offset":N,"error":CODE or null,"length":N or null}
  {"event":"longWrite","parts":N,"length":N,"error":CODE or null}
  {"event":"subscribed"}  {"event":"notify","length":N,"value":HEX}  x --notify-count
  {"event":"disconnected"}  {"event":"done"}
A failure prints {"event":"error","message":...} and exits 1.
"""

import argparse
import asyncio

from bumble import att
from bumble.core import UUID

import bumble_peer
from bumble_peer import emit


async def read_beyond_end(client, handle, offset):
    """One Read Blob Request at `offset`: (ATT error code, None) or (None, length of the part)."""
    response = await client.send_request(att.ATT_Read_Blob_Request(attribute_handle=handle, value_offset=offset))
    if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
        return int(response.error_code), None
    return None, len(response.part_attribute_value)


async def long_write(client, handle, value):
    """Prepare Write Requests of MTU - 5 bytes, then Execute Write: (parts sent, ATT error code or None)."""
    step = client.mtu - 5
    parts = 0
    for offset in range(0, len(value), step):
        part = value[offset:offset + step]
        response = await client.send_request(
            att.ATT_Prepare_Write_Request(attribute_handle=handle, value_offset=offset, part_attribute_value=part))
        parts += 1
        if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
            await client.send_request(att.ATT_Execute_Write_Request(flags=0))
            return parts, int(response.error_code)
        if response.value_offset != offset or bytes(response.part_attribute_value) != part:
            raise RuntimeError(f"Prepare Write Response at {offset} does not echo the part")
    response = await client.send_request(att.ATT_Execute_Write_Request(flags=1))
    if response.op_code == att.Opcode.ATT_ERROR_RESPONSE:
        return parts, int(response.error_code)
    return parts, None


def main():
    parser = argparse.ArgumentParser(description="Long reads, long writes and the ATT MTU against a peripheral.")
    parser.add_argument("--service", required=True)
    parser.add_argument("--long", required=True, help="characteristic to read long and beyond its end")
    parser.add_argument("--write", required=True, help="characteristic to write long")
    parser.add_argument("--notify", required=True, help="characteristic to subscribe to")
    parser.add_argument("--mtu", type=int, default=23)
    parser.add_argument("--write-length", type=int, default=300)
    parser.add_argument("--notify-count", type=int, default=0)
    bumble_peer.add_arguments(parser, address="F1:B0:00:00:00:40")
    args = parser.parse_args()
    args.name = "Bumble long client"

    async def run(device):
        connection, found = await bumble_peer.connect_to_service(device, UUID(args.service), args.mtu)
        long_value, written, notified = (found.get(UUID(u)) for u in (args.long, args.write, args.notify))
        if None in (long_value, written, notified):
            raise RuntimeError(f"missing characteristics: found {list(found)}")
        client = connection.gatt_client
        emit("mtu", mtu=client.mtu)

        value = await long_value.read_value()
        emit("read", length=len(value), value=bytes(value).hex())
        offset = len(value) + 1
        error, length = await read_beyond_end(client, long_value.handle, offset)
        emit("readBeyondEnd", offset=offset, error=error, length=length)

        if args.write_length > 0:
            data = bytes(index % 256 for index in range(args.write_length))
            parts, error = await long_write(client, written.handle, data)
            emit("longWrite", parts=parts, length=len(data), error=error)

        if args.notify_count > 0:
            values = asyncio.Queue()
            await notified.subscribe(values.put_nowait)
            emit("subscribed")
            for _ in range(args.notify_count):
                got = bytes(await values.get())
                emit("notify", length=len(got), value=got.hex())
            await notified.unsubscribe()
        await connection.disconnect()
        emit("disconnected")

    bumble_peer.run(args, lambda device: bumble_peer.hold_default_mtu(device, args.mtu), run)


if __name__ == "__main__":
    main()
