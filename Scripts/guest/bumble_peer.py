"""What the Bumble peer programs (Scripts/guest/bumble_*.py) share: their JSON event lines, the
Bumble Device on the controller that Scripts/guest/bumble-link.py serves them, and a bounded run.

Each peer is a Bumble host on its own fresh Bumble controller (Bumble's `unix:PATH` transport to
bumble-link's socket, BLUEZKIT_BUMBLE_SOCKETS in the guest); that controller shares a Bumble
LocalLink with the controller the guest's bluetoothd manages (BLUEZKIT_BUMBLE_ADAPTERS).
Bumble's stack is the judge: these programs use its profiles and GATT API and report what it
did or refused, and check nothing themselves beyond what a test asks them to print.
"""

import asyncio
import json
import os
import sys

from bumble import att
from bumble.core import AdvertisingData
from bumble.device import Device, Peer
from bumble.hci import Address
from bumble.transport import open_transport


def emit(event, **fields):
    """One JSON object on its own line of standard output: {"event": EVENT, ...}."""
    print(json.dumps({"event": event, **fields}, sort_keys=True), flush=True)


def default_transport():
    """Bumble's transport to the first Bumble controller's socket in the guest."""
    sockets = os.environ.get("BLUEZKIT_BUMBLE_SOCKETS", "").split()
    return f"unix:{sockets[0]}" if sockets else None


def add_arguments(parser, address, timeout=120):
    parser.add_argument("--transport", default=default_transport(),
                        help="Bumble transport to the peer's controller (default: unix:<first BLUEZKIT_BUMBLE_SOCKETS>)")
    parser.add_argument("--address", default=address, help="the peer's random static address")
    parser.add_argument("--timeout", type=float, default=timeout, help="bound of the whole run, in seconds")


def run(args, prepare, main):
    """Makes a Bumble Device named args.name, calls `prepare(device)` (add services), powers it on,
    then awaits `main(device)`; prints {"event":"done"} and exits 0 when it returns, prints
    {"event":"error"} and exits 1 when it raises or --timeout passes."""

    async def bounded():
        if not args.transport:
            raise RuntimeError("no --transport and no BLUEZKIT_BUMBLE_SOCKETS (run under bluez-vm run --bumble N)")
        async with await open_transport(args.transport) as transport:
            device = Device.with_hci(args.name, Address(args.address), transport.source, transport.sink)
            prepare(device)
            await device.power_on()
            await main(device)

    try:
        asyncio.run(asyncio.wait_for(bounded(), args.timeout))
    except asyncio.TimeoutError:
        emit("error", message=f"timed out after {args.timeout} s")
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 (every failure is reported the same way)
        emit("error", message=f"{type(error).__name__}: {error}")
        sys.exit(1)
    emit("done")


SERVICE_UUID_LISTS = tuple(getattr(AdvertisingData, f"{kind}_LIST_OF_{bits}_BIT_SERVICE_CLASS_UUIDS")
                           for bits in (16, 32, 128) for kind in ("COMPLETE", "INCOMPLETE"))


async def scan_for_service(device, service_uuid):
    """Scans until an advertiser lists `service_uuid` (any of the service UUID lists), emits
    "scanning" once the scan runs, stops scanning and returns the advertiser's address."""
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement):
        listed = [uuid for kind in SERVICE_UUID_LISTS for uuid in advertisement.data.get(kind) or []]
        if service_uuid in listed and not found.done():
            found.set_result(advertisement.address)

    device.on("advertisement", on_advertisement)
    await device.start_scanning(filter_duplicates=True)
    emit("scanning")
    address = await found
    await device.stop_scanning()
    return address


def hold_default_mtu(device, mtu):
    """With `mtu` the default (23), the device's GATT server answers a peer's Exchange MTU with 23
    too, so that the link stays at 23 whichever side asks (call it in `prepare`): a peripheral's
    bluetoothd asks for its MTU as a GATT client of its own."""
    if mtu == att.ATT_DEFAULT_MTU:
        device.gatt_server.max_mtu = att.ATT_DEFAULT_MTU


async def connect_to_service(device, service_uuid, mtu=att.ATT_DEFAULT_MTU):
    """As a GATT client: scans for `service_uuid` (scan_for_service), connects and emits
    "connected", exchanges the ATT MTU when `mtu` is above the default, and discovers the service
    and its characteristics with Bumble's Peer. Returns the connection and the characteristics by
    UUID; raises when the peer has no such service."""
    address = await scan_for_service(device, service_uuid)
    connection = await device.connect(address)
    emit("connected")
    peer = Peer(connection)
    if mtu > att.ATT_DEFAULT_MTU:
        await peer.request_mtu(mtu)
    services = await peer.discover_service(service_uuid)
    if not services:
        raise RuntimeError(f"the peer has no service {service_uuid}")
    return connection, {c.uuid: c for c in await services[0].discover_characteristics()}
