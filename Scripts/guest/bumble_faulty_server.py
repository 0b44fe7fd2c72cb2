"""What the misbehaving Bumble GATT servers (Scripts/guest/bumble_<fault>.py) share.

Each of them is a peripheral that answers most of the central's ATT requests as Bumble's own GATT
server does and gets one thing wrong on purpose (see its docstring); BlueZKit's central on the
Bumble-backed adapter is the one under test (Tests/EndToEndTests/FaultyPeerEndToEndTests.swift).
This module advertises the peer's service, connectable, and reports the link:
  {"event":"advertising"}  {"event":"connected","peer":ADDRESS}  {"event":"disconnected","reason":CODE}
and `serve` is the whole run of such a server, until its link ends. Well-behaved Bumble
peripherals (bumble_uart_echo_server, bumble_returning_peripheral, bumble_mtu_server, …) use its
`advertise` and `watch_link` too.
"""

import asyncio

from bumble.core import AdvertisingData, UUID

import bumble_peer
from bumble_peer import emit

# The test's service: 5A1E0B01-…, its characteristics 5A1E0B02-… and on (FaultyPeerEndToEndTests).
SERVICE_UUID = UUID("5A1E0B01-B1E2-4C00-9E00-000000000001")


def characteristic_uuid(index):
    """The index-th characteristic of the test's service: 5A1E0B02-… for 0, 5A1E0B03-… for 1."""
    return UUID(f"5A1E0B{index + 2:02X}-B1E2-4C00-9E00-000000000001")


def watch_link(device):
    """Emits "connected" and "disconnected" for every link; returns an Event set when one ends,
    and a list that holds the current connection (empty until the first)."""
    ended = asyncio.Event()
    connections = []

    def on_connection(connection):
        connections[:] = [connection]
        emit("connected", peer=str(connection.peer_address))

        def on_disconnection(reason):
            emit("disconnected", reason=reason)
            ended.set()

        connection.on("disconnection", on_disconnection)

    device.on("connection", on_connection)
    return ended, connections


async def advertise(device, name, service_uuid=SERVICE_UUID):
    """Advertises `name` (none when None) and the service's 128-bit UUID, connectable, once, and
    emits "advertising"."""
    fields = [
        (AdvertisingData.FLAGS, bytes([AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                       | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG])),
        (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, bytes(service_uuid)),
    ]
    if name is not None:
        fields.append((AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()))
    device.advertising_data = bytes(AdvertisingData(fields))
    await device.start_advertising(auto_restart=False)
    emit("advertising")


def serve(args, services, prepare=None, service_uuid=SERVICE_UUID):
    """The run of a GATT server peer (bumble_peer.run) until its first link ends: adds `services`,
    reports the link (watch_link), calls `prepare(device, connections)` when given (`connections`:
    watch_link's list), then advertises args.name and `service_uuid` once."""
    link = {}

    def prepare_device(device):
        device.add_services(services)
        link["ended"], connections = watch_link(device)
        if prepare is not None:
            prepare(device, connections)

    async def until_the_link_ends(device):
        await advertise(device, args.name, service_uuid)
        await link["ended"].wait()

    bumble_peer.run(args, prepare_device, until_the_link_ends)
