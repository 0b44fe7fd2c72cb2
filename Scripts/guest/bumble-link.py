"""bumble-link — one Bumble-backed controller for the guest's bluetoothd, and a socket for a Bumble peer.

Started by Scripts/guest/vm-init (`bluez-vm run --bumble N`), once per Bumble controller, with the
Python of the Bumble venv that `bluez-vm setup --bumble` made. Nothing of BlueZKit is used here.

  bumble-link.py --socket PATH [--address BD_ADDR]

- A Bumble `Controller` attached to the kernel through /dev/vhci (Bumble's `vhci` transport): the
  kernel registers it as the next hciN, and bluetoothd manages and powers it like btvirt's.
- A Bumble `LocalLink` in this process that it sits on (its radio).
- A Unix socket at PATH where a peer program (Scripts/guest/bumble_*.py) connects with Bumble's
  `unix:PATH` transport: each client gets a fresh Bumble `Controller` on the same link, so each peer
  starts from a clean controller. When the client goes, its controller's links are ended (LL
  terminate, "remote user terminated") and it leaves the link.

Prints "ready hciN" on standard output once the kernel has the vhci controller's index, and writes
its process id to PATH.pid (next to the socket) for the signals below.

The vhci controller can go away and come back, as a USB adapter pulled out and plugged in again
(btvirt's controllers cannot: they go only with btvirt, which every later test needs):
- SIGUSR1 unplugs it: its links end on the peers' side with a connection timeout (0x08, what a
  radio that vanished leaves behind), it leaves the link, and /dev/vhci is closed, so the kernel
  unregisters hciN and bluetoothd removes the adapter.
- SIGUSR2 plugs it back: /dev/vhci again, with a fresh controller of the same public address on the
  same link; the kernel registers it with the lowest free index (hciN again when nothing took it),
  and bluetoothd adds and powers it (AutoEnable).
Each is logged ("unplug done", "plug done: hciN") on standard error; a signal for the state it is
already in does nothing, so SIGUSR2 is always safe (a test restores the adapter with it).

The link is Bumble's own with one change (SelfAddressLink): Bumble 0.0.236's
`LocalLink.send_acl_data` sends LE data as coming from the sender's *random* address, also on a
connection that the sender made with its public one; the kernel sets a random address to scan and
then connects with its public address, so the peer's controller finds "no connection for" the
random address and drops everything after the first ATT request. Here LE data is sent from the
address the sender's connection uses (its `self_address`), which is what a radio would carry.

The vhci controller is Bumble's with one change (LocalHostReasonController): Bumble 0.0.236's
`Controller.on_hci_disconnect_command` reports the command's own reason (0x13 for the kernel's
Disconnect) in the Disconnection Complete event it sends its host, where a controller reports 0x16,
Connection Terminated By Local Host, to the host that ended the link (btvirt does from 5.82:
emulator/btdev.c, cmd_disconnect_complete, "Local host has different reason (Core v5.3 Vol 4 Part E
Sec 7.1.6)"). Linux 6.12 passes that reason on (Device Disconnected "remote host"), so bluetoothd
from 5.83 told an app that another process had ended the link with "terminated by remote user".
Here the peer still gets the command's reason in its LL terminate indication, and the host 0x16.
"""

import argparse
import asyncio
import logging
import os
import signal
import sys

from bumble import hci, ll
from bumble.controller import Controller
from bumble.core import PhysicalTransport
from bumble.link import LocalLink
from bumble.transport import open_transport
from bumble.transport.common import StreamPacketSink, StreamPacketSource


class SelfAddressLink(LocalLink):
    """Bumble's LocalLink, sending LE ACL data from the connection's own address (see above)."""

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        connection = None
        if transport == PhysicalTransport.LE:
            connection = sender_controller.le_connections.get(destination_address)
        if connection is None or connection.self_address == sender_controller.random_address:
            return super().send_acl_data(sender_controller, destination_address, transport, data)
        destination = self.find_le_controller(destination_address)
        if destination is None:
            return None
        source = connection.self_address
        asyncio.get_running_loop().call_soon(lambda: destination.on_link_acl_data(source, transport, data))
        return None


class LocalHostReasonController(Controller):
    """Bumble's Controller, reporting 0x16 to its own host for an LE link it was told to end (see above)."""

    def on_hci_disconnect_command(self, command):
        connection = self.find_le_connection_by_handle(command.connection_handle)
        if connection is None or not self.link:
            return super().on_hci_disconnect_command(command)
        self._send_hci_command_status(hci.HCI_COMMAND_STATUS_PENDING, command.op_code)
        connection.send_ll_control_pdu(ll.TerminateInd(command.reason))
        self.on_le_disconnected(connection, hci.HCI_ErrorCode.CONNECTION_TERMINATED_BY_LOCAL_HOST_ERROR)
        return None


class PeerHost(asyncio.Protocol):
    """One peer program on the socket: a fresh controller on the link for as long as it is connected."""

    serial = 0

    def __init__(self, link):
        self.link = link
        self.source = StreamPacketSource()
        self.controller = None

    def connection_made(self, transport):
        PeerHost.serial += 1
        self.controller = Controller(
            f"peer{PeerHost.serial}", host_source=self.source, host_sink=StreamPacketSink(transport), link=self.link,
            public_address=f"F0:00:00:00:{PeerHost.serial // 256 % 256:02X}:{PeerHost.serial % 256:02X}")
        log(f"peer program connected (controller {self.controller.name})")

    def data_received(self, data):
        self.source.data_received(data)

    def connection_lost(self, exc):
        controller, self.controller = self.controller, None
        if controller is None:
            return
        end_links(controller, hci.HCI_ErrorCode.REMOTE_USER_TERMINATED_CONNECTION_ERROR)
        log(f"peer program gone (controller {controller.name} removed)")


def log(message):
    sys.stderr.write(f"bumble-link: {message}\n")
    sys.stderr.flush()


class VhciAdapter:
    """The controller on /dev/vhci, which can be unplugged and plugged back (see the docstring)."""

    def __init__(self, link, address):
        self.link = link
        self.address = address
        self.transport = None
        self.controller = None
        self.index = None
        # One change at a time, in the order the signals came.
        self.changes = asyncio.Lock()

    async def plug(self):
        """Opens /dev/vhci with a fresh controller on the link; returns the kernel's hci index."""
        async with self.changes:
            if self.transport is not None:
                return self.index
            index = asyncio.get_running_loop().create_future()
            transport = await open_transport("vhci")
            # The kernel's first packet on /dev/vhci (HCI_VENDOR_PKT, opcode, index) names the
            # controller: keep the index for "ready". It is little-endian (vhci_create_device in the
            # kernel's drivers/bluetooth/hci_vhci.c); Bumble 0.0.236 logs it byte-swapped (hci512 for hci2).
            original = transport.source.data_received

            def data_received(data):
                if len(data) == 4 and data[0] == 0xFF and not index.done():
                    index.set_result(data[2] | data[3] << 8)
                original(data)

            transport.source.data_received = data_received
            self.controller = LocalHostReasonController("vhci", host_source=transport.source, host_sink=transport.sink,
                                         link=self.link, public_address=self.address)
            self.transport = transport
            self.index = await asyncio.wait_for(index, 30)
            return self.index

    async def unplug(self):
        """Ends the controller's links as a vanished radio does (the peers' supervision timeout),
        takes it off the link and closes /dev/vhci, so the kernel unregisters hciN."""
        async with self.changes:
            if self.transport is None:
                return
            controller, transport = self.controller, self.transport
            self.controller = self.transport = None
            end_links(controller, hci.HCI_ErrorCode.CONNECTION_TIMEOUT_ERROR)
            await transport.close()


def end_links(controller, reason):
    """Terminates the controller's LE links with `reason`, stops its advertising, takes it off its link."""
    for connection in list(controller.le_connections.values()):
        connection.send_ll_control_pdu(ll.TerminateInd(reason))
    controller.le_legacy_advertiser.stop()
    for advertising_set in controller.advertising_sets.values():
        stop = getattr(advertising_set, "stop", None)
        if stop:
            stop()
    controller.host = None
    if controller.link is not None:
        controller.link.remove_controller(controller)
    controller.link = None


async def main():
    parser = argparse.ArgumentParser(description="A Bumble controller on /dev/vhci and a socket for its peer.")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--address", default="F0:00:00:00:00:B0", help="the vhci controller's public address")
    args = parser.parse_args()

    link = SelfAddressLink()
    adapter = VhciAdapter(link, args.address)
    loop = asyncio.get_running_loop()

    def change(name, coroutine):
        async def logged():
            try:
                result = await coroutine
                log(f"{name} done" + (f": hci{result}" if result is not None else ""))
            except Exception as error:  # noqa: BLE001 (reported; the link serves on)
                log(f"{name} failed: {type(error).__name__}: {error}")
        loop.create_task(logged())

    loop.add_signal_handler(signal.SIGUSR1, lambda: change("unplug", adapter.unplug()))
    loop.add_signal_handler(signal.SIGUSR2, lambda: change("plug", adapter.plug()))
    index = await adapter.plug()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = await loop.create_unix_server(lambda: PeerHost(link), args.socket)
    with open(f"{args.socket}.pid", "w") as pid_file:
        pid_file.write(f"{os.getpid()}\n")
    print(f"ready hci{index}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("BUMBLE_LOGLEVEL", "WARNING").upper())
    asyncio.run(main())
